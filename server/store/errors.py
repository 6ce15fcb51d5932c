"""Errors the query functions raise, so callers can map them to contract statuses."""
from __future__ import annotations

from ..database.errors import UnstorableText  # noqa: F401  (raised by a backend, answered by callers)


class Refused(Exception):
    """A request the store's own rules refuse: a quota or a count reached, a conflict with a
    concurrent write, a row that is not there. `status` is the contract's status the caller
    answers with, `message` its sentence. The store raises no wire error: an action's answer is
    made at the boundary (server/verification/dispatch.py), a tool's failure by the tool."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class NotFound(LookupError):
    """The row an update names does not exist (the caller usually answers 404)."""


class InvalidCursor(ValueError):
    """A list cursor that this store did not hand out (the caller answers 400)."""

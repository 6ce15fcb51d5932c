"""Errors the query functions raise, so callers can map them to contract statuses."""
from __future__ import annotations

from ..storage.errors import UnstorableText  # noqa: F401  (raised by a backend, answered by callers)


class NotFound(LookupError):
    """The row an update names does not exist (the caller usually answers 404)."""


class InvalidCursor(ValueError):
    """A list cursor that this store did not hand out (the caller answers 400)."""

"""Errors the query functions raise, so callers can map them to contract statuses."""
from __future__ import annotations

class NotFound(LookupError):
    """The row an update names does not exist (the caller usually answers 404)."""


class InvalidCursor(ValueError):
    """A list cursor that this store did not hand out (the caller answers 400)."""


class UnstorableText(ValueError):
    """Text the database cannot hold: PostgreSQL's text type has no U+0000 (the caller answers
    400). SQLite stores it; a deployment on PostgreSQL refuses it, never half-written."""

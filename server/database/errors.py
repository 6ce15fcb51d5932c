"""The storage's own refusals (seed_agents.server.database), apart from the store's (seed_agents.server.store.errors)."""
from __future__ import annotations


class StorageError(Exception):
    """Base of the storage's refusals: the server exits with status 2 on one at start
    (server/main.py), e.g. PostgreSQL unreachable (postgres.database.StorageUnavailable)."""


class SchemaGateError(Exception):
    """The database cannot be used by this build; the server exits with status 2."""

    exit_code = 2

    def __init__(self, path: str, found: int | None, expected: int, reason: str) -> None:
        self.path = path
        self.found = found          # None when the file is not a readable SQLite database
        self.expected = expected
        self.reason = reason
        shown = "unreadable" if found is None else str(found)
        super().__init__(f"database {path}: {reason} (schema version found: {shown}, "
                         f"this build expects: {expected}); the file was not changed")


class SchemaMigrationError(SchemaGateError):
    """A migration failed; its transaction was rolled back, so the file is as it was."""


class UnstorableText(ValueError):
    """Text the database cannot hold: PostgreSQL's text type has no U+0000 (the caller answers
    400). SQLite stores it; a deployment on PostgreSQL refuses it, never half-written."""

"""The storage's own refusals (server.storage), apart from the store's (server.store.errors)."""
from __future__ import annotations


class StorageError(Exception):
    """Base of the storage's refusals: the server exits with status 2 on one at start
    (server/main.py), e.g. PostgreSQL unreachable (pg_database.StorageUnavailable)."""

"""The old import path of three storage names; the async port that lived here is gone.

The server reaches its store through `server.store.database.Database` (SQLite) or
`server.storage.pg_database.PgDatabase` (PostgreSQL), both running the functions of
`server.store` (docs/storage.md). These names now live in `server.storage.notices` and
`server.storage.errors`; they are re-exported here only so code written against this path
(server/storage/pg_bus.py today) keeps importing. New code imports from their homes.
"""
from __future__ import annotations

from server.storage.errors import StorageError
from server.storage.notices import MAX_NOTICE_BYTES, Notice, Resync

__all__ = ["MAX_NOTICE_BYTES", "Notice", "Resync", "StorageError"]

"""Where the store lives, chosen by one URL (CONTRACT section 7, docs/storage.md).

The server has one set of store functions (`server.store`) and two façades that run them:
`server.store.database.Database` on a SQLite file, and `pg_database.PgDatabase` on PostgreSQL.

- `url`: `sqlite:FILE` | `postgresql://...`, shown only redacted.
- `pg_database`, `dialect`: PgDatabase, and the rewrite of the store's SQLite SQL for PostgreSQL.
- `pg_gate`: the PostgreSQL schema gate (schema/postgres/).
- `notices`, `pg_bus`: small notices between servers (LISTEN/NOTIFY), bounded subscriptions.
- `errors`: StorageError, the storage's own refusals.
"""
from __future__ import annotations

from server.storage.url import StorageURL, StorageURLError, parse_storage_url


def database_for(config):
    """The store the configuration names: `server.store.database.Database` on the SQLite file,
    or `PgDatabase` on the PostgreSQL URL (not yet started: `await db.start()` passes the
    schema gate). Both run the same `server.store` functions."""
    url = config.storage_url
    if url is not None and url.is_postgresql:
        from server.storage.pg_database import PgDatabase   # psycopg is imported only when used

        return PgDatabase(url)
    from server.store.database import Database

    return Database(config.db_path)


__all__ = ["StorageURL", "StorageURLError", "database_for", "parse_storage_url"]

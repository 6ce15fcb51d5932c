"""The storage port and its drivers, chosen by one URL (CONTRACT section 7, docs/storage.md).

- `url`: `sqlite:FILE` | `postgresql://...`, shown only redacted.
- `port`: the interface (StoragePort, StorageTx, NoticeBus) and its errors.
- `sqlite`: the port over today's apsw store (server.store), single-process leases and notices.
- `postgres`, `pg_gate`, `pg_bus`: psycopg 3 + pool, the PostgreSQL schema gate, LISTEN/NOTIFY.
- `notices`: notice encoding, bounded subscriptions, the in-process bus.

Not wired yet: handlers, hub and runtime still call server.store directly (docs/storage.md).
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


def make_storage(url: StorageURL | str, **options):
    """The driver for `url` (not yet open: `await storage.open()` passes the schema gate)."""
    if isinstance(url, str):
        url = parse_storage_url(url)
    if url.is_sqlite:
        from server.storage.sqlite import SqliteStorage

        return SqliteStorage(url, **options)
    from server.storage.postgres import PostgresStorage  # psycopg is imported only when used

    return PostgresStorage(url, **options)


__all__ = ["StorageURL", "StorageURLError", "database_for", "make_storage", "parse_storage_url"]

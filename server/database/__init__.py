"""Where the store lives, chosen by one URL (CONTRACT section 7, docs/storage.md).

The server has one set of store functions (`seed_agents.server.store`) and one port they run through
(`port.py`: the connection, the façade, the traits where backends differ), with one adapter
folder per backend: `sqlite/` (façade, gate, file lock) and `postgres/` (façade, gate, SQL
rewrite, bus of notices).

- `url`: `sqlite:FILE` | `postgresql://...`, shown only redacted.
- `workers`: the write queue and reader threads every façade runs its work on.
- `end_writes`: rows a group-committing writer writes once, at a batch's end, in key order.
- `notices`: small notices between servers and their bounded subscriptions (the bus is the
  shared backend's: `postgres/bus.py`).
- `errors`: StorageError, the schema gates' refusals, UnstorableText.
- `filemodes`: the data folder 0700 and database files 0600, whatever the umask.

May import: schema. (The store's queries, server/store/, sit above the port.)
"""
from __future__ import annotations

from .url import StorageURL, StorageURLError, parse_storage_url


def database_for(config):
    """The store the configuration names (a `port.Storage`): `sqlite.database.Database` on the
    SQLite file, or `postgres.database.PgDatabase` on the PostgreSQL URL (not yet started: `await db.start()` passes the
    schema gate). Both run the same `seed_agents.server.store` functions."""
    url = config.storage_url
    if url is not None and url.is_postgresql:
        from .postgres.database import PgDatabase  # psycopg is imported only when used

        return PgDatabase(url)
    from .sqlite.database import Database

    return Database(config.db_path)


__all__ = ["StorageURL", "StorageURLError", "database_for", "parse_storage_url"]

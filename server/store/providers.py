"""Model provider configs per account (SetModelProvider, ListModelProviders).

Each row has an id (a UUID v4, RedactedModelProvider.id) made when the name is first set and
kept by every later SetModelProvider of that name.
"""
from __future__ import annotations

import uuid

from ..database.port import Conn
from . import codec

_COLUMNS = "id, name, config, created_at, updated_at"


def set_provider(conn: Conn, account_id: str, name: str, config: dict, now: int,
                 provider_id: str | None = None) -> dict:
    """Create or replace the named provider; its id and created_at survive a replace.
    Returns the stored row as {id, name, config, createdAt, updatedAt}."""
    row = conn.execute(
        "INSERT INTO model_providers (account_id, name, config, created_at, updated_at, id)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, name) DO UPDATE SET config = excluded.config,"
        f" updated_at = excluded.updated_at RETURNING {_COLUMNS}",
        (account_id, name, codec.encode(config), now, now, provider_id or str(uuid.uuid4()))).fetchone()
    return _provider(row)


def get_provider(conn: Conn, account_id: str, name: str) -> dict | None:
    """{id, name, config, createdAt, updatedAt}, or None."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM model_providers WHERE account_id = ? AND name = ?",
        (account_id, name)).fetchone()
    return None if row is None else _provider(row)


def count_providers(conn: Conn, account_id: str) -> int:
    return conn.execute("SELECT count(*) FROM model_providers WHERE account_id = ?", (account_id,)).fetchone()[0]


def list_providers(conn: Conn, account_id: str) -> list[dict]:
    """[{id, name, config, createdAt, updatedAt}] ordered by name."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM model_providers WHERE account_id = ? ORDER BY name",
        (account_id,)).fetchall()
    return [_provider(row) for row in rows]


def _provider(row: tuple) -> dict:
    provider_id, name, config, created_at, updated_at = row
    return {"id": provider_id, "name": name, "config": codec.decode(config), "createdAt": created_at,
            "updatedAt": updated_at}

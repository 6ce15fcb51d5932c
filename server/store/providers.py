"""Model provider configs per account (SetModelProvider, ListModelProviders)."""
from __future__ import annotations

import apsw

from server.store import codec


def set_provider(conn: apsw.Connection, account_id: str, name: str, config: dict, now: int) -> None:
    """Create or replace the named provider; created_at survives a replace."""
    conn.execute(
        "INSERT INTO model_providers (account_id, name, config, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, name) DO UPDATE SET config = excluded.config,"
        " updated_at = excluded.updated_at",
        (account_id, name, codec.encode(config), now, now))


def get_provider(conn: apsw.Connection, account_id: str, name: str) -> dict | None:
    """{name, config, createdAt, updatedAt}, or None."""
    row = conn.execute(
        "SELECT name, config, created_at, updated_at FROM model_providers"
        " WHERE account_id = ? AND name = ?", (account_id, name)).fetchone()
    return None if row is None else _provider(row)


def list_providers(conn: apsw.Connection, account_id: str) -> list[dict]:
    """[{name, config, createdAt, updatedAt}] ordered by name."""
    rows = conn.execute(
        "SELECT name, config, created_at, updated_at FROM model_providers"
        " WHERE account_id = ? ORDER BY name", (account_id,)).fetchall()
    return [_provider(row) for row in rows]


def _provider(row: tuple) -> dict:
    name, config, created_at, updated_at = row
    return {"name": name, "config": codec.decode(config), "createdAt": created_at, "updatedAt": updated_at}

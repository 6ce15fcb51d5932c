"""Sealed secret values per account. Only ciphertext is stored (see server.store.secrets)."""
from __future__ import annotations

import apsw

from server.store import codec


def set_secret(conn: apsw.Connection, account_id: str, name: str, ciphertext: bytes,
               metadata: dict | None, now: int) -> None:
    """Create or replace; `ciphertext` must already be sealed with an AAD naming this row."""
    conn.execute(
        "INSERT INTO secrets (account_id, name, ciphertext, metadata, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, name) DO UPDATE SET ciphertext = excluded.ciphertext,"
        " metadata = excluded.metadata, updated_at = excluded.updated_at",
        (account_id, name, bytes(ciphertext), None if metadata is None else codec.encode(metadata),
         now, now))


def get_secret_ciphertext(conn: apsw.Connection, account_id: str, name: str) -> bytes | None:
    row = conn.execute("SELECT ciphertext FROM secrets WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else row[0]


def list_secret_names(conn: apsw.Connection, account_id: str) -> list[str]:
    rows = conn.execute("SELECT name FROM secrets WHERE account_id = ? ORDER BY name", (account_id,))
    return [name for (name,) in rows]

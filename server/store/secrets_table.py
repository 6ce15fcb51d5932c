"""Sealed secret values per account. Only ciphertext is stored (see seed_agents.server.store.secrets).

Each row has an id (a UUID v4, RedactedSecret.id) made when the name is first set and kept by
every later SetSecret of that name.
"""
from __future__ import annotations

import uuid

from ..database.port import Conn
from . import codec


def set_secret(conn: Conn, account_id: str, name: str, ciphertext: bytes,
               metadata: dict | None, now: int, secret_id: str | None = None) -> dict:
    """Create or replace; `ciphertext` must already be sealed with an AAD naming this row.
    Returns what may be shown of it: {id, name, metadata?, createdAt, updatedAt}."""
    row = conn.execute(
        "INSERT INTO secrets (account_id, name, ciphertext, metadata, created_at, updated_at, id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, name) DO UPDATE SET ciphertext = excluded.ciphertext,"
        " metadata = excluded.metadata, updated_at = excluded.updated_at"
        " RETURNING id, name, metadata, created_at, updated_at",
        (account_id, name, bytes(ciphertext), None if metadata is None else codec.encode(metadata),
         now, now, secret_id or str(uuid.uuid4()))).fetchone()
    secret_id, name, metadata, created_at, updated_at = row
    info: dict = {"id": secret_id, "name": name, "createdAt": created_at, "updatedAt": updated_at}
    if metadata is not None:
        info["metadata"] = codec.decode(metadata)
    return info


def secret_aad(account_id: str, name: str) -> bytes:
    """The additional data a secret is sealed with: it binds a ciphertext to its row, so it
    cannot be moved to another account or name."""
    return f"{account_id}\x00{name}".encode()


def read_secret(conn: Conn, box, account_id: str, name: str) -> bytes | None:  # noqa: ANN001
    """The opened value of secret `name` of `account_id` (`box`: the server's SecretBox), or
    None when there is no such secret."""
    sealed = get_secret_ciphertext(conn, account_id, name)
    if sealed is None:
        return None
    return box.open(bytes(sealed), secret_aad(account_id, name))


def get_secret_ciphertext(conn: Conn, account_id: str, name: str) -> bytes | None:
    row = conn.execute("SELECT ciphertext FROM secrets WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else row[0]


def list_secret_names(conn: Conn, account_id: str) -> list[str]:
    rows = conn.execute("SELECT name FROM secrets WHERE account_id = ? ORDER BY name", (account_id,))
    return [name for (name,) in rows]


def get_secret_metadata(conn: Conn, account_id: str, name: str) -> dict | None:
    """The secret's metadata ({} when it has none), or None when there is no such secret."""
    row = conn.execute("SELECT metadata FROM secrets WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    if row is None:
        return None
    return codec.decode(row[0]) if row[0] is not None else {}


# -- a subscription sign-in's tokens (server/runtime/subscription_tokens.py): refreshed once
# across servers under a lease kept in the row's metadata, each write checked against the version read
def token_row(conn: Conn, account_id: str, name: str) -> tuple[bytes, dict, int] | None:
    """A subscription sign-in's sealed tokens, metadata (its refresh lease) and version."""
    row = conn.execute("SELECT ciphertext, metadata, updated_at FROM secrets WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    if row is None:
        return None
    sealed, meta, updated = row
    return bytes(sealed), (codec.decode(meta) if meta is not None else {}), updated


def swap_token_metadata(conn: Conn, account_id: str, name: str, updated: int, meta: dict, new_meta: dict, now: int) -> bool:
    """Write `new_meta` only if the row is still as it was read (updated_at and metadata)."""
    same = " AND metadata = ?" if meta else " AND metadata IS NULL"
    row = conn.execute(
        "UPDATE secrets SET metadata = ?, updated_at = ? WHERE account_id = ? AND name = ? AND updated_at = ?"
        + same + " RETURNING id",
        (codec.encode(new_meta), max(now, updated + 1), account_id, name, updated,
         *([codec.encode(meta)] if meta else []))).fetchone()
    return row is not None


def mark_token(conn: Conn, account_id: str, name: str, meta: dict, now: int) -> None:
    conn.execute("UPDATE secrets SET metadata = ?, updated_at = CASE WHEN updated_at >= ? THEN updated_at + 1"
                 " ELSE ? END WHERE account_id = ? AND name = ?", (codec.encode(meta), now, now, account_id, name))


def store_token(conn: Conn, account_id: str, name: str, sealed: bytes, meta: dict, now: int) -> None:
    conn.execute("UPDATE secrets SET ciphertext = ?, metadata = ?, updated_at = CASE WHEN updated_at >= ? THEN"
                 " updated_at + 1 ELSE ? END WHERE account_id = ? AND name = ?",
                 (sealed, codec.encode(meta), now, now, account_id, name))


def delete_secret(conn: Conn, account_id: str, name: str) -> None:
    conn.execute("DELETE FROM secrets WHERE account_id = ? AND name = ?", (account_id, name))

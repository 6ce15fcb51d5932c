"""Signing identities per account: Seed account keys the server holds for the account's agents.

A row keeps the seed sealed (seed_agents.server.store.secrets.SecretBox, with `identity_aad` naming the row,
so a sealed seed cannot be moved to another account or name, nor taken for a secret's value) and
what may be shown: SigningIdentity = {id, name, accountId, label?, icon?, serverUrl?, createdAt,
updatedAt}. Nothing here ever returns the seed except `open_seed`.
"""
from __future__ import annotations

from seed_agents.protocol.api.actions_identities import signing_keys_of

from . import codec
from .errors import NotFound

_SHOWN = "id, name, identity_id, label, icon, server_url, created_at, updated_at"


def identity_aad(account_id: str, name: str) -> bytes:
    """The additional data a seed is sealed with: the row, and that it is an identity's seed."""
    return f"signing-identity\x00{account_id}\x00{name}".encode()


def insert_identity(conn, account_id: str, name: str, identity_id: str, row_id: str, sealed_seed: bytes,
                    label: str | None, server_url: str | None, origin: str, now: int) -> dict:
    """A new identity row; the caller has checked that the name is free (`get_identity`)."""
    conn.execute(
        "INSERT INTO signing_identities (account_id, name, id, identity_id, sealed_seed, label, icon,"
        " server_url, origin, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)",
        (account_id, name, row_id, identity_id, bytes(sealed_seed), label, server_url, origin, now, now))
    return shown((row_id, name, identity_id, label, None, server_url, now, now))


def get_identity(conn, account_id: str, name: str) -> dict | None:
    """The SigningIdentity named `name` of the account, or None."""
    row = conn.execute(f"SELECT {_SHOWN} FROM signing_identities WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else shown(row)


def open_seed(conn, box, account_id: str, name: str) -> bytes | None:  # noqa: ANN001
    """The identity's 32-byte seed, opened with the server's SecretBox, or None."""
    row = conn.execute("SELECT sealed_seed FROM signing_identities WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else box.open(bytes(row[0]), identity_aad(account_id, name))


def origin_of(conn, account_id: str, name: str) -> str | None:
    """`created` (made here) or `imported`, or None when there is no such identity."""
    row = conn.execute("SELECT origin FROM signing_identities WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else row[0]


def list_identities(conn, account_id: str, names: list[str] | None = None) -> list[dict]:
    """The account's identities, newest first; with `names`, only those (a collaborator's view)."""
    rows = conn.execute(f"SELECT {_SHOWN} FROM signing_identities WHERE account_id = ?"
                        " ORDER BY created_at DESC, id", (account_id,)).fetchall()
    wanted = None if names is None else set(names)
    return [shown(row) for row in rows if wanted is None or row[1] in wanted]


def count_identities(conn, account_id: str) -> int:
    return conn.execute("SELECT count(*) FROM signing_identities WHERE account_id = ?",
                        (account_id,)).fetchone()[0]


def missing_names(conn, account_id: str, names: list[str]) -> list[str]:
    """Those of `names` that are not identities of the account, in order."""
    return [name for name in names if conn.execute(
        "SELECT 1 FROM signing_identities WHERE account_id = ? AND name = ?", (account_id, name)).fetchone() is None]


def update_identity(conn, account_id: str, name: str, label: str, icon: str | None,
                    server_url: str | None, now: int) -> dict:
    """Set the label (and the icon and server, when given: None keeps what is stored)."""
    row = conn.execute(
        "UPDATE signing_identities SET label = ?, icon = coalesce(?, icon), server_url = coalesce(?, server_url),"
        f" updated_at = ? WHERE account_id = ? AND name = ? RETURNING {_SHOWN}",
        (label, icon, server_url, now, account_id, name)).fetchone()
    if row is None:
        raise NotFound(f"signing identity {name} not found")
    return shown(row)


def delete_identity(conn, account_id: str, name: str) -> bool:
    conn.execute("DELETE FROM signing_identities WHERE account_id = ? AND name = ?", (account_id, name))
    return conn.changes() == 1


def agents_signing_with(conn, account_id: str, name: str) -> list[tuple[str, str]]:
    """(id, name) of the account's agents whose definition names the identity (signingKey or
    signingKeys), oldest first."""
    found = []
    for agent_id, definition in conn.execute(
            "SELECT id, definition FROM agents WHERE account_id = ? ORDER BY created_at, id", (account_id,)):
        decoded = codec.decode(definition)
        if isinstance(decoded, dict) and name in signing_keys_of(decoded):
            found.append((agent_id, str(decoded.get("name", ""))))
    return found


def forget_idempotency(conn, account_id: str, name: str) -> None:
    """Drop the account's Create/ImportSigningIdentity records whose answer is this identity, so
    a retried create after a delete does not answer with a key the server no longer holds."""
    doomed = []
    for action, client_id, response in conn.execute(
            "SELECT action, client_id, response FROM idempotency WHERE account_id = ?"
            " AND action IN ('CreateSigningIdentity', 'ImportSigningIdentity')", (account_id,)):
        answer = codec.decode(response)
        if isinstance(answer, dict) and (answer.get("identity") or {}).get("name") == name:
            doomed.append((account_id, action, client_id))
    conn.executemany("DELETE FROM idempotency WHERE account_id = ? AND action = ? AND client_id = ?", doomed)


def shown(row: tuple) -> dict:
    """SigningIdentity of a row (optional fields omitted, never null)."""
    row_id, name, identity_id, label, icon, server_url, created_at, updated_at = row
    identity = {"id": row_id, "name": name, "accountId": identity_id}
    if label is not None:
        identity["label"] = label
    if icon is not None:
        identity["icon"] = icon
    if server_url is not None:
        identity["serverUrl"] = server_url
    identity.update(createdAt=created_at, updatedAt=updated_at)
    return identity


def mark_published(conn, account_id: str, name: str, server_url: str, now: int) -> None:  # noqa: ANN001
    """The identity's queued publication went out (server/hypermedia/publications.py): it is on
    `server_url` now."""
    conn.execute("UPDATE signing_identities SET server_url = ?, updated_at = max(updated_at, ?)"
                 " WHERE account_id = ? AND name = ?", (server_url, now, account_id, name))

"""The secrets key a database's secrets are sealed with, checked at every start (CONTRACT section 7).

A server started with another key than the one its secrets were sealed with (a new data dir's
fresh `secrets.key`, a changed SEED_AGENTS_SECRETS_KEY, another server of a shared database)
could not open them, and would find out only at a turn, long after it started. So the database
keeps one value sealed with the key of the first server that used it, and each server opens it
at start, on SQLite as on PostgreSQL: a server whose key cannot is refused before it listens.
A database from before this check, holding secrets but no check value, is tested on one of its
secrets instead.
"""
from __future__ import annotations

from .secrets import SecretBox, SecretOpenError, SecretsKeyError
from .secrets_table import secret_aad


class SecretsKeyMismatch(SecretsKeyError):
    """This server's key is not the one the database's secrets are sealed with."""

_NAME = "secrets_key_check"
_AAD = b"seed-agents secrets key check"


def _opens(box: SecretBox, sealed: bytes, aad: bytes) -> bool:
    try:
        box.open(bytes(sealed), aad)
    except SecretOpenError:
        return False
    return True


def same_key(conn, box: SecretBox) -> bool:
    """True when `box` holds the database's key (recorded now if none was yet)."""
    row = conn.execute("SELECT value FROM server_config WHERE key = ?", (_NAME,)).fetchone()
    if row is None:
        secret = conn.execute("SELECT account_id, name, ciphertext FROM secrets LIMIT 1").fetchone()
        if secret is not None and not _opens(box, secret[2], secret_aad(secret[0], secret[1])):
            return False
        conn.execute("INSERT INTO server_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                     (_NAME, box.seal(b"seed-agents", _AAD)))
        row = conn.execute("SELECT value FROM server_config WHERE key = ?", (_NAME,)).fetchone()
    return _opens(box, row[0], _AAD)


def record_key(conn, box: SecretBox) -> None:
    """Make `box`'s key the database's (the operator chose to start with a new key)."""
    conn.execute("INSERT INTO server_config (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (_NAME, box.seal(b"seed-agents", _AAD)))

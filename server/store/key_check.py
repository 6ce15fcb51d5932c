"""Every server on a shared database seals secrets with one key (CONTRACT section 7).

A server started with another key would seal secrets the others cannot open, and fail to open
theirs, long after it started. So the database keeps one value sealed with the key of the
first server that used it, and each server opens it at start: a server whose key cannot is
refused before it listens.
"""
from __future__ import annotations

from server.store.secrets import SecretBox, SecretOpenError, SecretsKeyError


class SecretsKeyMismatch(SecretsKeyError):
    """This server's key is not the one the shared database's secrets are sealed with."""

_NAME = "secrets_key_check"
_AAD = b"seed-agents secrets key check"


def same_key(conn, box: SecretBox) -> bool:
    """True when `box` holds the database's key (recorded now if none was yet)."""
    conn.execute("INSERT INTO server_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                 (_NAME, box.seal(b"seed-agents", _AAD)))
    sealed = conn.execute("SELECT value FROM server_config WHERE key = ?", (_NAME,)).fetchone()[0]
    try:
        box.open(sealed, _AAD)
    except SecretOpenError:
        return False
    return True

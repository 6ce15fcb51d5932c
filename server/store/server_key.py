"""The server's own Ed25519 key, which signs session heads (docs/protocol.md, "Verifiable history").

Made at the first start and kept in `server_config`, sealed with the secrets key like every
secret, so several servers on one PostgreSQL database share it as they share that key. A
database whose sealed key this server cannot open (the operator chose a new secrets key) gets a
new server key: heads signed before stay valid under the old public key whoever kept them.
"""
from __future__ import annotations

import logging

from .secrets import SecretBox, SecretOpenError

log = logging.getLogger(__name__)

_NAME = "server_signing_key"
_AAD = b"seed-agents server signing key"


def load_or_create(conn, box: SecretBox, fresh_seed: bytes) -> bytes:  # noqa: ANN001
    """The 32-byte seed of the server key; `fresh_seed` becomes it when there is none yet."""
    row = conn.execute("SELECT value FROM server_config WHERE key = ?", (_NAME,)).fetchone()
    if row is not None:
        try:
            return box.open(bytes(row[0]), _AAD)
        except SecretOpenError:
            log.warning("the server signing key cannot be opened with this secrets key: a new one "
                        "is made (heads signed before stay valid under the old public key)")
            conn.execute("UPDATE server_config SET value = ? WHERE key = ?", (box.seal(fresh_seed, _AAD), _NAME))
            return fresh_seed
    conn.execute("INSERT INTO server_config (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                 (_NAME, box.seal(fresh_seed, _AAD)))
    row = conn.execute("SELECT value FROM server_config WHERE key = ?", (_NAME,)).fetchone()
    return box.open(bytes(row[0]), _AAD)   # the winner's, when two servers started at once

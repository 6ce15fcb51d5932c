"""DeleteModelProvider's one transaction: the provider row, and its API key secret when no other
provider of the account names it."""
from __future__ import annotations

from ..database.port import Conn
from . import codec


def delete_provider(conn: Conn, account_id: str, name: str) -> tuple[bool, str | None]:
    """(deleted?, name of the secret deleted with it or None)."""
    row = conn.execute("SELECT config FROM model_providers WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    if row is None:
        return False, None
    conn.execute("DELETE FROM model_providers WHERE account_id = ? AND name = ?", (account_id, name))
    secret = (codec.decode(row[0]).get("secretRefs") or {}).get("apiKey")
    if not isinstance(secret, str):
        return True, None
    for (config,) in conn.execute("SELECT config FROM model_providers WHERE account_id = ?", (account_id,)):
        if (codec.decode(config).get("secretRefs") or {}).get("apiKey") == secret:
            return True, None  # still in use by another provider
    conn.execute("DELETE FROM secrets WHERE account_id = ? AND name = ?", (account_id, secret))
    return True, secret

"""Subscription sign-ins in progress (server/handlers/provider_oauth.py), one row per login, so any
server sharing the database can finish, read or cancel a login another one started.

A login is `pending` until its code is traded (`completed`, naming the secret it filled) or it
fails, is canceled, replaced by a newer login of the same account and provider type, or reaches
`expires_at` (`failed`, with one sentence). Expiry is applied by every function that reads a
login, so no timer is needed and every server sees the same. The verifier is stored sealed; the
caller seals and opens it (the secrets box is not the store's).
"""
from __future__ import annotations

from ..database.port import Conn

TIMED_OUT = "Sign-in timed out."
_COLUMNS = ("id, account_id, provider_type, verifier, state, status, exchange_until, exchange_failed, secret_name,"
            " error, expires_at, finished_at")


def _login(row: tuple) -> dict:
    keys = [c.strip() for c in _COLUMNS.split(",")]
    login = dict(zip(keys, row))
    login["verifier"] = bytes(login["verifier"])
    login["exchange_failed"] = bool(login["exchange_failed"])
    return login


def _expire(conn: Conn, now: int, account_id: str | None = None) -> None:
    where = " AND account_id = ?" if account_id is not None else ""
    conn.execute("UPDATE provider_logins SET status = 'failed', error = ?, finished_at = expires_at"
                 f" WHERE status = 'pending' AND expires_at <= ?{where}",
                 (TIMED_OUT, now, *(() if account_id is None else (account_id,))))


def sweep(conn: Conn, now: int, keep_ms: int) -> None:
    """Expire what is due, and forget logins finished more than `keep_ms` ago."""
    _expire(conn, now)
    conn.execute("DELETE FROM provider_logins WHERE status <> 'pending' AND finished_at < ?", (now - keep_ms,))


def start(conn: Conn, login_id: str, account_id: str, provider_type: str, verifier: bytes, state: str,
          now: int, expires_at: int, per_account: int, in_all: int) -> bool:
    """A new pending login; the account's pending one for the same provider type fails
    ("Replaced by a newer sign-in."), and its oldest finished ones go past `per_account`.
    False (nothing written) when `in_all` logins are held already."""
    _expire(conn, now, account_id)
    conn.execute("UPDATE provider_logins SET status = 'failed', error = 'Replaced by a newer sign-in.',"
                 " finished_at = ? WHERE account_id = ? AND provider_type = ? AND status = 'pending'",
                 (now, account_id, provider_type))
    mine = conn.execute("SELECT id FROM provider_logins WHERE account_id = ? AND status <> 'pending'"
                        " ORDER BY finished_at, id", (account_id,)).fetchall()
    pending = conn.execute("SELECT count(*) FROM provider_logins WHERE account_id = ? AND status = 'pending'",
                           (account_id,)).fetchone()[0]
    for (old,) in mine[:max(0, len(mine) + pending + 1 - per_account)]:
        conn.execute("DELETE FROM provider_logins WHERE id = ?", (old,))
    if conn.execute("SELECT count(*) FROM provider_logins").fetchone()[0] >= in_all:
        return False
    conn.execute("INSERT INTO provider_logins (id, account_id, provider_type, verifier, state, status,"
                 " expires_at, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                 (login_id, account_id, provider_type, verifier, state, expires_at, now))
    return True


def get(conn: Conn, account_id: str, login_id: str, now: int) -> dict | None:
    """The login as it stands at `now`, or None when it is not this account's (or not there)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM provider_logins WHERE id = ? AND account_id = ?",
                       (login_id, account_id)).fetchone()
    if row is None:
        return None
    login = _login(row)
    if login["status"] == "pending" and login["expires_at"] <= now:   # as _expire will write it
        login.update(status="failed", error=TIMED_OUT, finished_at=login["expires_at"])
    return login


def claim(conn: Conn, account_id: str, login_id: str, now: int, until: int) -> tuple[dict | None, str]:
    """Take the login for one code exchange, until `until`: (login, "ok"), or (login, why not:
    "ended" | "exchanging"), or (None, "missing")."""
    _expire(conn, now, account_id)
    row = conn.execute(f"SELECT {_COLUMNS} FROM provider_logins WHERE id = ? AND account_id = ?"
                       + conn.traits.lock_rows, (login_id, account_id)).fetchone()
    if row is None:
        return None, "missing"
    login = _login(row)
    if login["status"] != "pending":
        return login, "ended"
    if login["exchange_until"] is not None and login["exchange_until"] > now:
        return login, "exchanging"
    conn.execute("UPDATE provider_logins SET exchange_until = ? WHERE id = ?", (until, login_id))
    return login, "ok"


def fail(conn: Conn, login_id: str, error: str, now: int, exchange_failed: bool = False) -> bool:
    """Fail a pending login with one sentence; False when it had already ended."""
    conn.execute("UPDATE provider_logins SET status = 'failed', error = ?, finished_at = ?, exchange_until = NULL,"
                 " exchange_failed = ? WHERE id = ? AND status = 'pending'",
                 (error, now, int(exchange_failed), login_id))
    return conn.changes() > 0


def complete(conn: Conn, login_id: str, secret_name: str, now: int) -> bool:
    """Mark a pending, unexpired login completed (the caller writes its secret in the same
    transaction); False when it was canceled, replaced or expired meanwhile."""
    conn.execute("UPDATE provider_logins SET status = 'completed', secret_name = ?, finished_at = ?,"
                 " exchange_until = NULL WHERE id = ? AND status = 'pending' AND expires_at > ?",
                 (secret_name, now, login_id, now))
    return conn.changes() > 0

"""Accounts and the signers registered for them (RegisterSigner, verification step 5)."""
from __future__ import annotations

from ..database.port import Conn, execute_later


def ensure_account(conn: Conn, account_id: str, now: int) -> None:
    execute_later(conn, "INSERT INTO accounts (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
                  (account_id, now))


def hold_account(conn: Conn, account_id: str, now: int) -> None:
    """Make sure the account's row exists and hold it until the transaction ends: the per-account
    limits (runs in flight, trigger firings) count first and then write, so on a store that
    several servers share (PostgreSQL, READ COMMITTED) two servers must not count at once. There
    the row is locked (`lock_rows`); on SQLite the one writer already orders them, and an existing
    row costs a read, not a write."""
    ensure_account(conn, account_id, now)
    conn.execute(f"SELECT id FROM accounts WHERE id = ?{conn.traits.lock_rows}", (account_id,)).fetchone()


def add_signer(conn: Conn, account_id: str, signer_id: str, role: str,
               capability_cid: object, capability_blob: bytes, now: int,
               expires_at: int | None = None) -> None:
    """Register (or re-register, replacing role, capability and expiry) a delegate of the account."""
    ensure_account(conn, account_id, now)
    conn.execute(
        "INSERT INTO account_signers (account_id, signer_id, role, capability_cid, capability, created_at,"
        " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, signer_id) DO UPDATE SET role = excluded.role,"
        " capability_cid = excluded.capability_cid, capability = excluded.capability,"
        " expires_at = excluded.expires_at",
        (account_id, signer_id, role, _cid_value(capability_cid), capability_blob, now, expires_at))


def signer_expiry(conn: Conn, account_id: str, signer_id: str) -> tuple[bool, int | None]:
    """(registered, expires_at): whether the signer is registered, and until when (None: no
    expiry; the caller compares with its clock)."""
    row = conn.execute("SELECT expires_at FROM account_signers WHERE account_id = ? AND signer_id = ?",
                       (account_id, signer_id)).fetchone()
    return (False, None) if row is None else (True, row[0])


def is_signer(conn: Conn, account_id: str, signer_id: str, now: int | None = None) -> bool:
    registered, expires_at = signer_expiry(conn, account_id, signer_id)
    return registered and (expires_at is None or now is None or expires_at > now)


def remove_signer(conn: Conn, account_id: str, signer_id: str) -> bool:
    """Unregister a delegate; False when it was not registered."""
    conn.execute("DELETE FROM account_signers WHERE account_id = ? AND signer_id = ?", (account_id, signer_id))
    return conn.changes() > 0


def _cid_value(cid: object) -> object:
    # The column takes text or bytes; a CID object is stored as its string form.
    if cid is None or isinstance(cid, (str, bytes)):
        return cid
    return str(cid)

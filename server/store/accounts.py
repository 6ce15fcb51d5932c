"""Accounts and the signers registered for them (RegisterSigner, verification step 5)."""
from __future__ import annotations

from server.storage.port import Conn



def ensure_account(conn: Conn, account_id: str, now: int) -> None:
    conn.execute("INSERT INTO accounts (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
                 (account_id, now))


def add_signer(conn: Conn, account_id: str, signer_id: str, role: str,
               capability_cid: object, capability_blob: bytes, now: int) -> None:
    """Register (or re-register, replacing role and capability) a delegate of the account."""
    ensure_account(conn, account_id, now)
    conn.execute(
        "INSERT INTO account_signers (account_id, signer_id, role, capability_cid, capability, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, signer_id) DO UPDATE SET role = excluded.role,"
        " capability_cid = excluded.capability_cid, capability = excluded.capability",
        (account_id, signer_id, role, _cid_value(capability_cid), capability_blob, now))


def is_signer(conn: Conn, account_id: str, signer_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM account_signers WHERE account_id = ? AND signer_id = ?",
                       (account_id, signer_id)).fetchone()
    return row is not None


def _cid_value(cid: object) -> object:
    # The column takes text or bytes; a CID object is stored as its string form.
    if cid is None or isinstance(cid, (str, bytes)):
        return cid
    return str(cid)

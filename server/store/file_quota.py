"""Bytes an account holds in files, against the operator's quota (`--file-quota-bytes`).

What counts: the size of every memory file of the account's agents, of every attachment of its
sessions, and the declared size of its uploads in progress, each as the account sees it (a file
stored once for two sessions counts twice: deduplication is the server's saving, not a credit).
"""
from __future__ import annotations
from .errors import Refused



def used_bytes(conn, account_id: str) -> int:
    row = conn.execute(
        "SELECT coalesce((SELECT sum(size) FROM memory_files WHERE account_id = ?1), 0)"
        " + coalesce((SELECT sum(size) FROM session_attachments WHERE account_id = ?1), 0)"
        " + coalesce((SELECT sum(size) FROM file_uploads WHERE owner_account = ?1), 0)",
        (account_id,)).fetchone()
    return int(row[0])


def charge(conn, account_id: str, adding: int, quota: int | None, freeing: int = 0) -> None:
    """413 when `adding` more bytes (less `freeing`, e.g. the file being replaced) would take the
    account past `quota`; None or 0 means no quota."""
    if not quota or adding <= freeing:
        return
    used = used_bytes(conn, account_id)
    if used - freeing + adding > quota:
        raise Refused(413, f"File quota exceeded: this account holds {used} bytes of files and the "
                                 f"quota is {quota} bytes; delete files or ask the operator for more")

"""Session attachments: files a user attached to a session, private to it and deleted with it.

An attachment's id is the SHA-256 hex of its bytes (the reference's), so attaching the same bytes
again to a session returns the first attachment; the bytes are a blob (server/store/blobs.py),
stored once however many sessions attach them.

- `info(conn, session_id, attachment_id)` -> SessionAttachmentInfo | None.
- `blob_of(conn, session_id, attachment_id)` -> (info, blob id) | None: for streamed reads
  (`blobs.iter_range(db.read, blob_id, ...)`), e.g. the agent's `read attachment:<id>`.
- `read(conn, session_id, attachment_id, max_bytes)` -> (info, bytes), 404/413.
- `save(conn, session_id, account_id, name, mime_type, data, now, quota)` -> info.
- `attach_blob(...)`: the same for bytes already sealed (a committed upload).
- `delete_session_attachments(conn, session_ids)`: with DeleteSession / DeleteAgent.
"""
from __future__ import annotations

import hashlib

from seed_agents.protocol.wire.file_rules import MAX_SESSION_ATTACHMENTS

from . import blobs, file_quota
from .errors import Refused

_COLUMNS = "id, session_id, name, mime_type, size, created_at"


def _info(row) -> dict:
    attachment_id, session_id, name, mime, size, created = row
    out = {"id": attachment_id, "sessionId": session_id, "name": name, "size": size, "createdAt": created}
    if mime is not None:
        out["mimeType"] = mime
    return out


def info(conn, session_id: str, attachment_id: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM session_attachments WHERE session_id = ? AND id = ?",
                       (session_id, attachment_id)).fetchone()
    return None if row is None else _info(row)


def blob_of(conn, session_id: str, attachment_id: str) -> tuple[dict, int] | None:
    row = conn.execute(f"SELECT {_COLUMNS}, blob_id FROM session_attachments WHERE session_id = ? AND id = ?",
                       (session_id, attachment_id)).fetchone()
    return None if row is None else (_info(row[:6]), row[6])


def read(conn, session_id: str, attachment_id: str, max_bytes: int, offset: int = 0,
         length: int | None = None) -> tuple[dict, bytes]:
    """(info, bytes [offset, offset+length)); 404 when absent, 413 when the range is over `max_bytes`."""
    found = blob_of(conn, session_id, attachment_id)
    if found is None:
        raise Refused(404, f"Attachment not found: {attachment_id}")
    meta, blob_id = found
    want = max(0, meta["size"] - offset) if length is None else max(0, min(length, meta["size"] - offset))
    if want > max_bytes:
        raise Refused(413, f"Attachment {attachment_id} is {meta['size']} bytes, more than the {max_bytes} "
                                 f"one answer carries; read it in ranges (offset, length)")
    return meta, blobs.read_range(conn, blob_id, offset, want)


def _existing_or_room(conn, session_id: str, attachment_id: str) -> dict | None:
    existing = info(conn, session_id, attachment_id)
    if existing is not None:
        return existing
    n = conn.execute("SELECT count(*) FROM session_attachments WHERE session_id = ?", (session_id,)).fetchone()[0]
    if n >= MAX_SESSION_ATTACHMENTS:
        raise Refused(413, f"Session already has {MAX_SESSION_ATTACHMENTS} attachments")
    return None


def check_room(conn, session_id: str, account_id: str, size: int, quota: int | None) -> None:
    """The refusals an attachment of `size` bytes would meet (BeginFileUpload asks up front)."""
    n = conn.execute("SELECT count(*) FROM session_attachments WHERE session_id = ?", (session_id,)).fetchone()[0]
    if n >= MAX_SESSION_ATTACHMENTS:
        raise Refused(413, f"Session already has {MAX_SESSION_ATTACHMENTS} attachments")
    file_quota.charge(conn, account_id, size, quota)


def save(conn, session_id: str, account_id: str, name: str, mime_type: str | None, data: bytes, now: int,
         quota: int | None = None) -> dict:
    """Attach `data` to the session (idempotent for equal bytes: the first attachment's info).
    `account_id` is the session's owner (the quota's account)."""
    digest = hashlib.sha256(data).digest()
    existing = _existing_or_room(conn, session_id, digest.hex())
    if existing is not None:
        return existing
    file_quota.charge(conn, account_id, len(data), quota)
    blob_id = blobs.put(conn, data, now, digest)
    return _insert(conn, session_id, account_id, digest.hex(), blob_id, name, mime_type, len(data), now)


def attach_blob(conn, session_id: str, account_id: str, sha256: bytes, blob_id: int, name: str,
                mime_type: str | None, size: int, now: int) -> dict:
    """Attach a sealed blob the caller holds one reference to (the reference passes to the
    attachment, or is released when the session already has these bytes)."""
    existing = _existing_or_room(conn, session_id, sha256.hex())
    if existing is not None:
        blobs.release(conn, blob_id)
        return existing
    return _insert(conn, session_id, account_id, sha256.hex(), blob_id, name, mime_type, size, now)


def _insert(conn, session_id, account_id, attachment_id, blob_id, name, mime_type, size, now) -> dict:
    conn.execute("INSERT INTO session_attachments (session_id, id, account_id, blob_id, name, mime_type, size,"
                 " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (session_id, attachment_id, account_id, blob_id, name, mime_type, size, now))
    return _info((attachment_id, session_id, name, mime_type, size, now))


def delete_session_attachments(conn, session_ids: list[str]) -> int:
    """Remove the sessions' attachments, freeing bytes nothing else references; returns how many."""
    counts: dict[int, int] = {}
    removed = 0
    for session_id in session_ids:
        for (blob_id,) in conn.execute("DELETE FROM session_attachments WHERE session_id = ? RETURNING blob_id",
                                       (session_id,)).fetchall():
            counts[blob_id] = counts.get(blob_id, 0) + 1
            removed += 1
    blobs.release_many(conn, counts)
    return removed

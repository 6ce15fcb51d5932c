"""Chunked uploads: a staged blob (server/store/blobs.py) filled chunk by chunk, in order, then
committed to its target (a memory path or a session attachment) or dropped.

Uploads live in the database, not in a server's memory or disk, so on PostgreSQL a client may
append through one server and commit through another, and a server killed mid-upload leaves a
row that `sweep` drops once it has not moved for UPLOAD_TTL_MS (an hour, as the reference).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seed_agents.protocol.wire.file_rules import MAX_ACTIVE_UPLOADS_PER_ACCOUNT, UPLOAD_TTL_MS

from . import blobs
from .errors import Refused

_COLUMNS = ("id, account_id, owner_account, blob_id, kind, agent_id, session_id, path, name, mime_type, size,"
            " received, updated_at")


@dataclass(frozen=True, slots=True)
class Upload:
    id: str
    account_id: str      # the uploader
    owner_account: str   # the quota's account
    blob_id: int
    kind: str            # memory | session-attachment
    agent_id: str
    session_id: str | None
    path: str | None
    name: str | None
    mime_type: str | None
    size: int
    received: int
    updated_at: int


def get(conn, upload_id: str, account_id: str) -> Upload:
    """The account's upload; 404 for no such upload or another account's (the same answer)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM file_uploads WHERE id = ?", (upload_id,)).fetchone()
    if row is None or row[1] != account_id:
        raise Refused(404, "Upload not found")
    return Upload(*row)


def begin(conn, upload_id: str, account_id: str, owner_account: str, target: dict, size: int, now: int) -> None:
    """Record a new upload of `size` bytes to `target` ({kind, agentId, sessionId?, path?, name?,
    mimeType?}: checked by the caller); 429 past MAX_ACTIVE_UPLOADS_PER_ACCOUNT in progress."""
    active = conn.execute("SELECT count(*) FROM file_uploads WHERE account_id = ?", (account_id,)).fetchone()[0]
    if active >= MAX_ACTIVE_UPLOADS_PER_ACCOUNT:
        raise Refused(429, f"Too many uploads in progress (at most {MAX_ACTIVE_UPLOADS_PER_ACCOUNT}); "
                                 "commit or abort one first")
    blob_id = blobs.stage(conn, size, now)
    conn.execute("INSERT INTO file_uploads (id, account_id, owner_account, blob_id, kind, agent_id, session_id, path,"
                 " name, mime_type, size, received, created_at, updated_at)"
                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                 (upload_id, account_id, owner_account, blob_id, target["kind"], target["agentId"],
                  target.get("sessionId"), target.get("path"), target.get("name"), target.get("mimeType"),
                  size, now, now))


def append(conn, upload_id: str, account_id: str, offset: int, data: bytes, now: int) -> int:
    """Add one chunk at `offset` (which must equal the bytes received: 409 otherwise, so a chunk
    repeated or out of order changes nothing); 400 past the declared size. Returns bytes received."""
    up = get(conn, upload_id, account_id)
    if offset != up.received:
        raise Refused(409, f"Chunk offset {offset} does not match {up.received} bytes received")
    if up.received + len(data) > up.size:
        raise Refused(400, f"Upload exceeds its declared size of {up.size} bytes")
    blobs.append(conn, up.blob_id, up.received, data)
    received = up.received + len(data)
    # The guard on `received` orders two appends racing on two servers: the second changes nothing.
    conn.execute("UPDATE file_uploads SET received = ?, updated_at = ? WHERE id = ? AND received = ?",
                 (received, now, upload_id, up.received))
    if conn.changes() != 1:
        raise Refused(409, "Another chunk of this upload arrived at the same time; retry at the new offset")
    return received


def finish(conn, upload_id: str, account_id: str, received: int) -> Upload:
    """Remove the upload's row for its commit (in the commit's transaction); 404 if it went
    meanwhile (aborted, swept, committed elsewhere), 409 if its bytes changed."""
    up = get(conn, upload_id, account_id)
    if up.received != received:
        raise Refused(409, "The upload changed while it was being committed; commit again")
    conn.execute("DELETE FROM file_uploads WHERE id = ?", (upload_id,))
    return up


def abort(conn, upload_id: str, account_id: str) -> None:
    up = get(conn, upload_id, account_id)
    _drop(conn, [(up.id, up.blob_id)])


def _drop(conn, rows) -> int:
    for upload_id, blob_id in rows:
        conn.execute("DELETE FROM file_uploads WHERE id = ?", (upload_id,))
        blobs.drop_staged(conn, blob_id)
    return len(rows)


def sweep(conn, now: int, ttl_ms: int = UPLOAD_TTL_MS, limit: int = 100) -> int:
    """Drop up to `limit` uploads untouched for `ttl_ms`, with their staged bytes; returns how many."""
    rows = conn.execute("SELECT id, blob_id FROM file_uploads WHERE updated_at < ? ORDER BY updated_at LIMIT ?",
                        (now - ttl_ms, limit)).fetchall()
    return _drop(conn, rows)


def drop_for(conn, agent_id: str | None = None, session_ids: Sequence[str] = ()) -> int:
    """Uploads into an agent being deleted (any of its targets) or into sessions being deleted."""
    rows = []
    if agent_id is not None:
        rows += conn.execute("SELECT id, blob_id FROM file_uploads WHERE agent_id = ?", (agent_id,)).fetchall()
    for session_id in session_ids:
        rows += conn.execute("SELECT id, blob_id FROM file_uploads WHERE session_id = ?", (session_id,)).fetchall()
    return _drop(conn, list(dict.fromkeys(map(tuple, rows))))

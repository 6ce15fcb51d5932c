"""Chunked uploads: BeginFileUpload, AppendFileUploadChunk, CommitFileUpload, AbortFileUpload.

The bytes go into the database as they arrive (server/store/uploads.py), so any server of a
cluster can take the next chunk or the commit. The commit first reads the staged bytes back
once, one chunk at a time and off the event loop (hash, size, text or not), then, in one
transaction, removes the upload and puts the bytes at their target: a commit either lands whole
or not at all, and bytes whose hash differs from the one declared are dropped.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.file_rules import MAX_UPLOAD_CHUNK_BYTES, infer_mime_type

from ..clock import new_id
from ..store import attachments as att_q
from ..store import blobs
from ..store import memory as memory_q
from ..store import uploads as uploads_q
from .access import WRITER, agent_access
from .attachments import session_owner
from .context import HandlerContext
from .memory_files import limits, memory_changed, owner_of


def _target_owner(conn, ctx, account_id: str, target, size: int) -> tuple[str, dict]:
    """(quota account, stored target) once the caller may write the target and `size` bytes
    would fit there (checked up front, so a long upload does not fail at its end)."""
    if target.kind == "memory":
        agent_access(conn, account_id, target.agent_id, WRITER)
        owner = owner_of(conn, target.agent_id)
        memory_q.check_writable(conn, target.agent_id, owner, target.path, size, limits(ctx))
        return owner, {"kind": "memory", "agentId": target.agent_id, "path": target.path}
    owner, agent_id = session_owner(conn, account_id, target.session_id, WRITER)
    att_q.check_room(conn, target.session_id, owner, size, ctx.config.file_quota_bytes or None)
    mime = target.mime_type or infer_mime_type(target.name)
    return owner, {"kind": "session-attachment", "agentId": agent_id, "sessionId": target.session_id,
                   "name": target.name, "mimeType": mime}


async def begin_file_upload(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()
    upload_id = new_id()

    def job(conn):
        uploads_q.sweep(conn, now)
        owner, target = _target_owner(conn, ctx, env.account_id, action.target, action.size)
        uploads_q.begin(conn, upload_id, env.account_id, owner, target, action.size, now)

    await ctx.db.write(job)
    return {"_": "BeginFileUploadResponse", "uploadId": upload_id, "maxChunkBytes": MAX_UPLOAD_CHUNK_BYTES}


async def append_file_upload_chunk(ctx: HandlerContext, env, action) -> dict:
    received = await ctx.db.write(uploads_q.append, action.upload_id, env.account_id, action.offset,
                                  action.content, ctx.now_ms())
    return {"_": "AppendFileUploadChunkResponse", "uploadId": action.upload_id, "received": received}


async def commit_file_upload(ctx: HandlerContext, env, action) -> dict:
    up = await ctx.db.aread(uploads_q.get, action.upload_id, env.account_id)
    if up.received != up.size:
        raise ProtocolError(400, f"Upload has {up.received} of {up.size} bytes; cannot commit")
    scan = await ctx.db.aread(blobs.scan, up.blob_id, memory_q.MAX_INDEXED_CHARS, large=True)
    if scan.size != up.size or (action.sha256 is not None and scan.sha256.hex() != action.sha256):
        await ctx.db.write(uploads_q.abort, action.upload_id, env.account_id)
        if scan.size != up.size:
            raise ProtocolError(409, f"Upload holds {scan.size} bytes, not the {up.size} declared; it was "
                                     "discarded, upload the file again")
        raise ProtocolError(400, f"Upload bytes hash to sha256 {scan.sha256.hex()}, not the {action.sha256} "
                                 "declared; nothing was kept, upload the file again")
    return await commit_scanned(ctx, env.account_id, action.upload_id, scan)


async def commit_scanned(ctx: HandlerContext, account_id: str, upload_id: str, scan: blobs.Scan) -> dict:
    """Move a staged upload whose bytes were scanned to its target, in one transaction."""
    now = ctx.now_ms()

    def job(conn):
        up = uploads_q.finish(conn, upload_id, account_id, scan.size)
        if up.kind == "memory":
            agent_access(conn, account_id, up.agent_id, WRITER)   # access may have changed meanwhile
            memory_q.check_writable(conn, up.agent_id, up.owner_account, up.path, scan.size, limits(ctx))
            blob_id = blobs.seal(conn, up.blob_id, scan.sha256)
            return up, {"entry": memory_q.link(conn, up.agent_id, up.owner_account, up.path, blob_id, scan.size,
                                               scan.text, now)}
        session_owner(conn, account_id, up.session_id, WRITER)
        blob_id = blobs.seal(conn, up.blob_id, scan.sha256)
        return up, {"attachment": att_q.attach_blob(conn, up.session_id, up.owner_account, scan.sha256, blob_id,
                                                    up.name, up.mime_type, scan.size, now)}

    up, result = await ctx.db.write(job)
    if up.kind == "memory":
        memory_changed(ctx, up.owner_account, up.agent_id)
    return {"_": "CommitFileUploadResponse", **result}


async def abort_file_upload(ctx: HandlerContext, env, action) -> dict:
    await ctx.db.write(uploads_q.abort, action.upload_id, env.account_id)
    return {"_": "AbortFileUploadResponse", "uploadId": action.upload_id}

"""UploadSessionAttachment and ReadSessionAttachment: session-private files (writers attach,
readers read), stored once per distinct content, deleted with the session."""
from __future__ import annotations

from seed_agents.protocol.wire.file_rules import infer_mime_type

from ..store import attachments as att_q
from ..store import owners as owners_q
from .access import READER, WRITER, session_access
from .context import HandlerContext


def session_owner(conn, account_id: str, session_id: str, need: str) -> tuple[str, str]:
    """(owner, agent id) of a session the caller may `need` (404 / 403 otherwise)."""
    session_access(conn, account_id, session_id, need)
    return owners_q.session_access(conn, session_id)[:2]


async def upload_session_attachment(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()
    mime = action.mime_type or infer_mime_type(action.name)

    def job(conn):
        owner, _agent = session_owner(conn, env.account_id, action.session_id, WRITER)
        return att_q.save(conn, action.session_id, owner, action.name, mime, action.content, now,
                          ctx.config.file_quota_bytes or None)

    return {"_": "UploadSessionAttachmentResponse", "attachment": await ctx.db.write(job)}


async def read_session_attachment(ctx: HandlerContext, env, action) -> dict:
    cap = ctx.config.file_answer_bytes

    def read(conn):
        session_access(conn, env.account_id, action.session_id, READER)
        offset = action.offset or 0
        length = action.length
        if action.offset is not None or action.length is not None:
            length = cap if length is None else min(length, cap)
        return att_q.read(conn, action.session_id, action.attachment_id, cap, offset, length)

    info, data = await ctx.db.aread(read, large=True)
    response = {"_": "ReadSessionAttachmentResponse", "attachment": info, "data": data}
    if action.offset is not None or action.length is not None:
        response["offset"] = action.offset or 0
    return response

"""GetSessionHead and GetSessionChain: a session's signed head, and its links and envelopes page
by page, for a client that checks what it replayed or exports the session (docs/protocol.md,
"Verifiable history"). Readers of the session may ask, as for GetSession."""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.api.history import cid_text

from ..store import history as history_q
from .access import READER, session_for
from .context import HandlerContext
from .pages import MAX_ANSWER_BYTES


def signed_head(ctx: HandlerContext, session_id: str, seq: int, link: bytes | None) -> dict | None:
    """The signed head at (seq, link), or None when there is nothing to sign (no events, or an
    event the start-up backfill has not linked)."""
    if seq == 0 or link is None:
        return None
    return ctx.heads.signed(session_id, seq, link)


async def get_session_head(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        session_for(conn, env.account_id, action.session_id, READER)
        return history_q.head_at(conn, action.session_id)

    seq, link = await ctx.db.aread(read)
    head = signed_head(ctx, action.session_id, seq, link)
    if head is None:
        if seq:
            raise ProtocolError(503, "this session's history is still being linked; ask again shortly")
        return {"_": "GetSessionHeadResponse", "sessionId": action.session_id, "seq": 0}
    return {"_": "GetSessionHeadResponse", **head, "serverKey": ctx.heads.public_id}


def _entry(seq: int, link: bytes | None, envelope: bytes | None) -> dict:
    entry: dict = {"seq": seq}
    if link is not None:   # (absent: stored before chains, not linked yet)
        entry["link"] = cid_text(link)
    if envelope is not None:
        entry["envelope"] = envelope
    return entry


async def get_session_chain(ctx: HandlerContext, env, action) -> dict:
    limit = action.limit or history_q.MAX_LINKS

    def read(conn):
        session_for(conn, env.account_id, action.session_id, READER)
        return history_q.chain_page(conn, action.session_id, action.after_seq, limit, MAX_ANSWER_BYTES)

    rows, more = await ctx.db.aread(read, large=True)
    response: dict = {"_": "GetSessionChainResponse", "sessionId": action.session_id,
                      "links": [_entry(seq, link, envelope) for seq, link, envelope in rows]}
    if rows:
        head = signed_head(ctx, action.session_id, rows[-1][0], rows[-1][1])
        if head is not None:
            response["head"] = head
    if more:
        response["nextAfterSeq"] = rows[-1][0]
    return response

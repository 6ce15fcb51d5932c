"""MessageSession (a person writes; the reply is queued as a run), RetrySession and StopSession."""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.wire.dagcbor import encode
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.api.history import cid_bytes, cid_text

from ..clock import new_id
from ..runtime import turns
from ..store import attachments as att_q
from ..store import handed_claim
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from . import public_chat
from .access import WRITER, session_for
from .context import HandlerContext
from .idempotency import once


def user_payload(env, action, attachments: Sequence[dict] = ()) -> dict:
    payload: dict = {"type": "message", "role": "user", "content": action.text,
                     "meta": {"accountId": env.account_id, "signerId": env.signer_id}}
    if attachments:   # the SessionAttachmentInfo of each attachment part, in order
        payload["attachments"] = list(attachments)
    client_message_id = action.client_message_id
    if client_message_id is not None:
        payload["clientMessageId"] = client_message_id
    if action.context_lines:
        payload["contextLines"] = list(action.context_lines)
    # The text parts' block trees, in order: kept for display, never sent to the model.
    blocks = [block for part in action.content for block in (getattr(part, "blocks", None) or ())]
    if blocks:
        payload["blocks"] = blocks
    return payload


def signed_envelope(env) -> tuple[bytes, str]:
    """The canonical bytes of the envelope that carried the action, and their CID: a user event
    records the CID and the store keeps the bytes, so an export proves who asked for exactly
    that (docs/protocol.md, "Verifiable history")."""
    envelope = env.raw   # the bytes verification checked, when it had them (no second encoding)
    if envelope is None:
        envelope = encode({"type": "AgentsAction", "signer": env.signer, "sig": env.sig, "account": env.account,
                           "action": env.action})
    return envelope, cid_text(cid_bytes(envelope))


def attachments_of(conn, session_id: str, attachment_id: str) -> dict:
    """An attachment part's SessionAttachmentInfo: it must be a file already attached to this session."""
    info = att_q.info(conn, session_id, attachment_id)
    if info is None:
        raise ProtocolError(404, f"Attachment not found: {attachment_id}")
    return info


async def message_session(ctx: HandlerContext, env, action) -> dict:
    timings = ctx.runtime.timings   # --turn-timings (server/operations/turn_timing.py), else None
    accepted = timings.now() if timings is not None else None
    now = ctx.now_ms()
    account_id = env.account_id
    session_id = action.session_id
    limits = turns.TurnLimits.from_config(ctx.config)
    envelope, envelope_cid = signed_envelope(env)

    def effect(conn):
        try:
            session = session_for(conn, account_id, session_id, WRITER)
            visiting = False
        except ProtocolError as refused:   # a visitor's own session (public chat), or refused as it was
            session, visiting = public_chat.own_session(conn, account_id, session_id, refused), True
        user_event_id, run_id = new_id(), new_id()
        if visiting:   # within the owner's limits (429 past them), the run's tokens reserved
            public_chat.admit_visitor_message(conn, session, run_id, now, ctx.config)
        attachments = [attachments_of(conn, session_id, a) for a in getattr(action, "attachment_ids", ())]
        # The run is the owner's; the message's meta names the real sender.
        message = user_payload(env, action, attachments)
        message["envelopeCid"] = envelope_cid
        started = turns.start_turn(conn, owner=session["account"], agent_id=session["agentId"],
                                   session_id=session_id, run_id=run_id, now=now, limits=limits,
                                   message=message, event_id=user_event_id, envelope=envelope,
                                   envelope_action=env.action,
                                   title=session.get("title") or sessions_q.title_from_text(action.text))
        response = {"_": "MessageSessionResponse", "sessionId": session_id, "assistantEventId": "",
                    "userEventId": user_event_id, "runId": run_id}
        return response, [started.effects]

    # Several servers: the replay claim is the job's first statement, durable in its commit (no
    # transaction and fsync of its own: server/store/handed_claim.py).
    claim = handed_claim.handed()

    def job(conn):
        if claim is not None:   # (refused: 409, before the effect; nothing of the job is kept)
            claim.refuse_unless(conn.execute(*claim.statement()).fetchall())
        response, done = once(conn, account_id, "MessageSession", action.client_message_id,
                              request_fingerprint(env.action), now, effect)
        # The queued run taken by this server in the same transaction, where the scheduling
        # can (several servers: no claim pass, commit and fsync of its own after this one).
        return response, done, ctx.runtime.claim_in(conn, now) if done else None

    response, done, taken = await ctx.db.write(job)
    if claim is not None:
        claim.made()
    if timings is not None:
        timings.accepted(response["runId"], accepted)

    def publish() -> None:
        kick = ctx.runtime.kick if ctx.runtime.took(taken) else _taken
        for effects in done:
            turns.publish(ctx.broadcaster, kick, effects)

    # Right after the response is queued (the caller queues it without awaiting): the sender
    # hears back first, however many sockets follow the session.
    asyncio.get_running_loop().call_soon(publish)
    return response


def _taken(session_id: str) -> None:
    """The kick of a run the write itself claimed: nothing left to wake."""


async def retry_session(ctx: HandlerContext, env, action) -> dict:
    """Queue the failed turn again, answering the same user message; the error events it left
    are not shown to the model (runtime.history keeps messages only)."""
    now = ctx.now_ms()
    account_id, session_id = env.account_id, action.session_id
    limits = turns.TurnLimits.from_config(ctx.config)

    def job(conn):
        session = session_for(conn, account_id, session_id, WRITER)
        if runs_q.has_active_run(conn, session_id):
            raise ProtocolError(409, f"session {session_id} has a live run; retry after it ends "
                                     "(or stop it: `seed-agents sessions stop`)")
        latest = runs_q.latest_run_of_session(conn, session_id)
        if latest is None or latest["status"] != "failed":
            got = "no run" if latest is None else f"its latest run {latest['status']}"
            raise ProtocolError(409, f"session {session_id} has nothing to retry: {got}; "
                                     "only a failed turn can be retried")
        return turns.start_turn(conn, owner=session["account"], agent_id=session["agentId"], session_id=session_id,
                                run_id=new_id(), now=now, limits=limits,
                                user_event_id=runs_q.user_event_of(conn, latest["id"]), title=latest["title"])

    started = await ctx.db.write(job)
    turns.publish(ctx.broadcaster, ctx.runtime.kick, started.effects)
    return {"_": "RetrySessionResponse", "sessionId": session_id, "assistantEventId": "", "runId": started.run["id"]}


async def stop_session(ctx: HandlerContext, env, action) -> dict:
    def check(conn):
        try:
            session_for(conn, env.account_id, action.session_id, WRITER)
        except ProtocolError as refused:   # a visitor stops its own session's reply (public chat)
            public_chat.own_session(conn, env.account_id, action.session_id, refused)

    await ctx.db.aread(check)
    stopped = await ctx.runtime.stop_session(action.session_id)
    return {"_": "StopSessionResponse", "sessionId": action.session_id, "stopped": stopped}

"""`continue_session`: the conversation goes on in a fresh session of the same agent (the storage
design's session continuations; protocol/agent/continuations.py has the manifest and the first message).

Whose authority: the agent's own, in a model turn of a top-level session only. A delegated child
reports to its parent instead, a trigger's headless tool has no conversation to continue, and a
person starts a session with CreateSession: each of those is refused in one sentence. The
successor is a session of the same agent and account (so exactly who could read the predecessor
reads it), and its first turn runs as the agent under the server's usual limits (the account's
runs in flight) as a fresh root run: it carries the handoff, never the predecessor's transcript.

Bounds: the handoff, reason, title and sources are bounded by the verb's schema (and again here);
one successor per session (a second call, retried or not, answers the first successor); a chain of
at most MAX_CHAIN successors from one origin session, so an agent that keeps continuing itself
stops. The edge and the successor's first turn are written in one transaction."""
from __future__ import annotations

import uuid

from seed_agents.protocol.agent import continuations as spec
from seed_agents.protocol.wire.errors import ProtocolError

from ..store import continuations as continuations_q
from ..store import events as events_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from ..store import turns as turns_q
from ..store.errors import Refused
from .context import ToolContext, ToolFailure, ToolResult


def _text(value, limit: int) -> str | None:  # noqa: ANN001
    return " ".join(value.split())[:limit] if isinstance(value, str) and value.strip() else None


async def continue_session(ctx: ToolContext, call_id: str, params: dict) -> ToolResult:
    if ctx.authority.via != "model":
        raise ToolFailure("continue_session is not offered here: only a conversation's own turn continues it "
                          "(a delegated task reports back to its parent; a trigger starts a new thread)")
    if ctx.started is None:
        raise ToolFailure("continue_session is not offered here: it needs a model's turn")
    handoff = params.get("handoff")
    if not isinstance(handoff, str) or not handoff.strip():
        raise ToolFailure("continue_session needs a handoff: everything the next session must know")
    handoff = handoff.strip()[:spec.MAX_HANDOFF_CHARS]
    reason = _text(params.get("reason"), spec.MAX_REASON_CHARS)
    sources = [s.strip()[:spec.MAX_SOURCE_CHARS] for s in (params.get("sources") or [])[:spec.MAX_SOURCES]
               if isinstance(s, str) and s.strip()]
    title = _text(params.get("title"), spec.MAX_TITLE_CHARS)
    now = ctx.now_ms()
    limits = turns_q.TurnLimits.from_config(ctx.config)
    new_id = lambda: str(uuid.uuid4())   # noqa: E731 (row ids as server/clock.py makes them)

    def job(conn):
        again = continuations_q.of_call(conn, ctx.session_id, call_id)
        if again is not None:   # a retried call: the successor its first attempt made
            return again, None, True
        predecessor = sessions_q.get_session(conn, ctx.session_id)
        if predecessor is None:
            raise ToolFailure("this session is gone; nothing was started")
        if "continuedBySessionId" in predecessor:   # one successor per session
            return continuations_q.of_successor(conn, predecessor["continuedBySessionId"]), None, True
        run = runs_q.get_run(conn, ctx.run_id)
        if run is None or run["status"] in runs_q.TERMINAL:
            raise ToolFailure("this run has ended; nothing was started")
        if "parentRunId" in run or "parentSessionId" in predecessor:
            raise ToolFailure("continue_session is not offered here: a delegated task reports back to its parent")
        incoming = continuations_q.of_successor(conn, ctx.session_id)
        origin = incoming["originSessionId"] if incoming else ctx.session_id
        if continuations_q.chain_length(conn, origin) >= spec.MAX_CHAIN:
            raise ToolFailure(f"this conversation has already continued {spec.MAX_CHAIN} times from "
                              f"thread:{origin}; carry on here")
        manifest = spec.build_manifest(handoff=handoff, reason=reason, sources=sources,
                                       predecessor_id=ctx.session_id,
                                       predecessor_events=events_q.last_seq(conn, ctx.session_id),
                                       plan=predecessor.get("plan"))
        successor_id = new_id()
        name = title or f"{predecessor.get('title') or 'Conversation'} (continued)"[:spec.MAX_TITLE_CHARS]
        message = {"type": "message", "role": "user", "actor": "system",
                   "content": spec.first_message(manifest, ctx.session_id, predecessor.get("title")),
                   "meta": {"continuedFromSessionId": ctx.session_id}}
        try:
            started = turns_q.start_turn(
                conn, owner=ctx.account, agent_id=ctx.agent["id"], session_id=successor_id, run_id=new_id(),
                now=now, limits=limits, message=message, event_id=new_id(),
                new_session=turns_q.NewSession(successor_id, name), title=name, origin=turns_q.AGENT)
        except (ProtocolError, Refused) as exc:   # the account's runs in flight
            raise ToolFailure(exc.message) from None
        edge = continuations_q.record(
            conn, successor_id=successor_id, predecessor_id=ctx.session_id, origin_id=origin,
            account_id=ctx.account, tool_call_id=call_id, run_id=ctx.run_id,
            event_id=runs_q.user_event_of(conn, ctx.run_id),
            reason=reason, manifest=manifest, now=now)
        effects = started.effects
        # the SessionInfos as they now stand: both links
        effects.created = [sessions_q.get_session(conn, successor_id)]
        effects.sessions.append(sessions_q.get_session(conn, ctx.session_id))
        return edge, effects, False

    edge, effects, earlier = await ctx.db.write(job)
    if effects is not None:
        ctx.started(effects)
    successor = ctx.db.read(sessions_q.get_session, edge["successorSessionId"])
    run_id = ctx.db.read(_first_run, edge["successorSessionId"])
    out = {"status": "continued", "sessionId": edge["successorSessionId"],
           "title": (successor or {}).get("title", ""), "address": f"thread:{edge['successorSessionId']}"}
    if run_id:
        out["runId"] = run_id
    out["summary"] = (f"This conversation {'already continues' if earlier else 'continues'} in "
                      f"thread:{edge['successorSessionId']}; tell the user, and end your turn.")
    return ToolResult(out)


_first_run = runs_q.first_run_of_session

"""CreateSession, ListSessions, GetSession, UpdateSession, DeleteSession."""
from __future__ import annotations

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.hm.blocks import system_prompt_markdown
from seed_agents.protocol.wire.dagcbor import encode
from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.wire.wire_values import RawEvents

from ..cache import text_bytes
from ..clock import new_id
from ..store import agent_lifecycle as lifecycle_q
from ..store import agents as agents_q
from ..store import codec
from ..store import collaborators as collab_q
from ..store import continuations as continuations_q
from ..store import events as events_q
from ..store import handed_claim
from ..store import history as history_q
from ..store import roles as roles_q
from ..store import runs as runs_q
from ..store import session_create, session_view
from ..store import sessions as sessions_q
from ..store import trigger_firings as firings_q
from . import public_chat
from .access import READER, VISITOR, WRITER, agent_access, agent_role, require, session_for
from .agent_definition import check_level
from .context import HandlerContext
from .history import signed_head
from .idempotency import once
from .pages import MAX_ANSWER_BYTES, sessions_with_agents

MAX_EVENTS = 10_000  # server cap on GetSession.limit (CONTRACT section 4)
# A page of events ends before this many bytes (nextAfterSeq says where): the answer bound less
# room for the session, its agent's system prompt and a trigger's context, so the whole answer
# stays within MAX_ANSWER_BYTES (a page is cut further when they need more).
MAX_RESPONSE_BYTES = MAX_ANSWER_BYTES - (512 << 10)


def system_prompt(ctx: HandlerContext, agent_id: str) -> str:
    """An agent's system prompt as Markdown (a block tree converted), cached rather than decoded
    on every GetSession; UpdateAgent and DeleteAgent drop the entry (forget_system_prompt)."""
    cache = ctx.cache["system_prompts"]   # bounded in bytes (--prompt-cache-bytes)
    prompt = cache.get(agent_id)
    if prompt is None:
        agent = ctx.db.read(agents_q.get_agent, agent_id)
        prompt = system_prompt_markdown((agent or {}).get("definition", {}))
        cache.put(agent_id, prompt, text_bytes(agent_id) + text_bytes(prompt))
    return prompt


def forget_system_prompt(ctx: HandlerContext, agent_id: str) -> None:
    ctx.cache["system_prompts"].pop(agent_id, None)
    if ctx.runtime is not None:   # the listing behind the model's preamble (server/runtime/preamble.py)
        ctx.runtime.preambles.forget(agent_id)


async def create_session(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()
    account_id = env.account_id
    # Each statement a round trip (PostgreSQL): fewer of them, the replay claim among them.
    claim = handed_claim.handed()
    try:
        job = created_together if ctx.db.traits.batched_reads else created_one_by_one
        response, created = await ctx.db.write(job, claim, account_id, action, request_fingerprint(env.action),
                                               now, new_id())
        if claim is not None:
            claim.made()
    except ProtocolError as refused:   # no write access: a visitor's session, when public chat is open
        if refused.status != 403 or not ctx.db.read(public_chat.may_chat, account_id, action.agent_id):
            raise
        if claim is not None:   # (its job, and the claim in it, rolled back)
            await claim.ensure()
        return await public_chat.create_visitor_session(ctx, env, action)
    for session, agent in created:
        ctx.broadcaster.publish_session(session, created=True)
        ctx.broadcaster.notify_account(session["account"], "session-created", agent_id=session["agentId"],
                           session_id=session["id"])
        if agent is not None:
            ctx.broadcaster.publish_change("agents/" + agent["id"], agent)
    return response


def created_one_by_one(conn, claim: handed_claim.HandedClaim | None, account_id: str, action, fingerprint: bytes, now: int,
                       session_id: str) -> tuple[dict, list]:
    """CreateSession's job: (response, [(session, AgentInfo)] to publish), at most once per
    clientRequestId (`once`). (No claim: one server keeps its replay claims in memory.)"""
    def effect(conn):
        agent_access(conn, account_id, action.agent_id, WRITER)
        # The AgentInfo to publish, its definition left as stored (the broadcaster decodes it once
        # per version). A writer's session is the owner's data: the row carries the owner's account.
        agent = agents_q.touch_agent(conn, action.agent_id, now, decoded=False)
        session = sessions_q.create_session(conn, session_id, agent["account"], action.agent_id, action.title, now)
        return {"_": "CreateSessionResponse", "sessionId": session_id}, [(session, agent)]

    return once(conn, account_id, "CreateSession", action.client_request_id, fingerprint, now, effect)


def created_together(conn, claim: handed_claim.HandedClaim | None, account_id: str, action, fingerprint: bytes,
                     now: int, session_id: str) -> tuple[dict, list]:
    """CreateSession's job where each statement is a round trip (`traits.batched_reads`): what
    `created_one_by_one` does, in one statement (server/store/session_create.py): the replay
    claim handed to the action, the idempotency record, the agent's row and the caller's grant
    read, the session and the record inserted with them. The answer is decided here, with the
    same checks in the same order (tests/server/handlers/test_create_session_job.py)."""
    client_id = action.client_request_id
    response = {"_": "CreateSessionResponse", "sessionId": session_id}
    encoded = codec.encode(response)
    sql, params = session_create.statement(None if claim is None else claim.statement()[1], account_id,
                                           action.agent_id, action.title, client_id, fingerprint, encoded, now,
                                           session_id)
    claimed, made, prior, grant, row = session_create.unpack(conn.execute(sql, params).fetchone())
    if claim is not None:
        claim.refuse_unless([claimed] if claimed else [])   # another server's: nothing was written
    if prior is not None:
        prior_fp, prior_response = prior
        if bytes(prior_fp) != fingerprint:
            raise ProtocolError(409, f"CreateSession id {quote(client_id)} was already used with a different request")
        return codec.decode(prior_response), []
    role = roles_q.agent_role_from(account_id, None if row is None else agents_q.flags_of(row), grant)
    require(role, WRITER, "agent", action.agent_id)   # (raised: the job's savepoint takes any insert back)
    agent = agents_q.touch_read_agent(conn, row, action.agent_id, now, decoded=False)
    if not made:   # (the statement's condition is narrower than the decision here: not expected)
        session_view.fetch_each(conn, session_create.inserts(session_id, account_id, agent["account"],
                                                             action.agent_id, action.title, client_id,
                                                             fingerprint, encoded, now))
    session = sessions_q.new_session_info(session_id, agent["account"], action.agent_id, action.title, now)
    return response, [(session, agent)]


async def list_sessions(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        # A shared agent's sessions are listed under its owner's account.
        account = env.account_id
        roles: dict[str, str] = {}
        if action.agent_id is not None:
            if agent_role(conn, env.account_id, action.agent_id) == VISITOR:   # its own sessions alone
                sessions, cursor = public_chat.visitor_sessions(conn, env.account_id, action.agent_id,
                                                                action.limit or 100, action.cursor)
                agent = public_chat.visitor_view(agents_q.get_agent(conn, action.agent_id), sessions)
                return sessions, [agent], cursor
            roles[action.agent_id] = agent_access(conn, env.account_id, action.agent_id, READER)
            account = agents_q.agent_account(conn, action.agent_id)
        if action.parent_session_id is not None:
            account = session_for(conn, env.account_id, action.parent_session_id, READER)["account"]
        unfiltered = action.agent_id is None and action.parent_session_id is None
        shared = collab_q.shared_agents(conn, env.account_id) if unfiltered else {}
        limit = action.limit or 100
        if shared:   # own sessions and those of the agents shared with the caller
            sessions, cursor = collab_q.sessions_page(conn, env.account_id, sorted(shared), limit,
                                                      action.cursor, action.include_children)
        else:   # (a shared agent's visitor sessions are its owner's and their visitors' alone)
            sessions, cursor = sessions_q.list_sessions(
                conn, account, action.agent_id, limit, action.cursor,
                parent_session_id=action.parent_session_id, include_children=action.include_children,
                visitors="all" if account == env.account_id else None)

        def role_of(agent_id: str) -> str | None:
            return roles.get(agent_id) or shared.get(agent_id) or agent_role(conn, env.account_id, agent_id)

        # The agents (definitions up to 256 KiB each) bound the page in bytes too.
        kept, agents = sessions_with_agents(conn, sessions, role_of)
        firings_q.attribute_sessions(conn, kept)   # startedByTrigger (triggers)
        if len(kept) < len(sessions):
            cursor = {"updatedBefore": kept[-1]["updatedAt"], "idBefore": kept[-1]["id"]}
        return kept, agents, cursor

    sessions, agents, cursor = await ctx.db.aread(read, large=True)
    response = {"_": "ListSessionsResponse", "sessions": sessions, "agents": agents}
    if cursor is not None:
        response["nextCursor"] = cursor
    return response


def session_reads(conn, account_id: str, session_id: str, after: int, limit: int,
                  max_bytes: int = MAX_RESPONSE_BYTES) -> tuple:
    """GetSession's reads, one after the other: (session, page rows, more, trigger context,
    head, continuation edge), once the account may read the session; a page ends before
    `max_bytes`, and an event over it is its stand-in."""
    session = session_for(conn, account_id, session_id, READER)
    rows, more = events_q.event_bodies_page(conn, session_id, after, limit, max_bytes, max_event=max_bytes)
    context = firings_q.trigger_context(conn, session_id) if after == 0 else None   # triggers
    head = history_q.head_at(conn, session_id, rows[-1][0]) if rows else None
    # a successor: the edge that made it, its manifest included (continue_session)
    edge = continuations_q.of_successor(conn, session_id) if after == 0 else None
    return session, rows, more, context, head, edge


def session_reads_together(conn, account_id: str, session_id: str, after: int, limit: int,
                           max_bytes: int = MAX_RESPONSE_BYTES) -> tuple:
    """`session_reads` in one round trip, where each statement is one (`traits.batched_reads`):
    the same answer (tests/server/handlers/test_get_session_reads.py)."""
    role, found = session_view.fetch(conn, account_id, session_id, after, limit, max_bytes, after == 0)
    require(role, READER, "session", session_id)
    return session_view.answer(conn, session_id, found, limit, max_bytes, max_bytes)


async def session_reads_on_loop(db, account_id: str, session_id: str, after: int, limit: int,
                               max_bytes: int = MAX_RESPONSE_BYTES,
                               claim: handed_claim.HandedClaim | None = None) -> tuple:
    """`session_reads` in one round trip on the loop's own connection (`aread_each`: no thread
    hand-off), or, when the answer needs one more read (rare: session_view.MoreReads), all of it
    again on a reader thread, in one snapshot. `claim`: the action's replay claim, made in the
    same round trip (refused: 409, before anything is looked at)."""
    found = await db.aread_each(session_view.statements, account_id, session_id, after, limit, max_bytes,
                                after == 0, claim=None if claim is None else claim.statement())
    if claim is not None:
        claim.refuse_unless(found.pop(0))
        claim.made()
    require(session_view.role_of(account_id, found), READER, "session", session_id)
    try:
        return session_view.answer(None, session_id, found, limit, max_bytes, max_bytes)
    except session_view.MoreReads:
        return await db.aread(session_reads_together, account_id, session_id, after, limit, max_bytes)


async def get_session(ctx: HandlerContext, env, action) -> dict:
    limit = min(action.limit or MAX_EVENTS, MAX_EVENTS)
    after = action.after_seq or 0

    # On SQLite, read on the loop without suspending: GetSession is answered inline
    # (server/routes.py); on PostgreSQL off the loop (Database.aread). A page is stored bytes
    # copied as they are (nothing decoded), at most 4 MiB of them.
    # What must hold across that await: a revocation (a grant removed, public read off, the
    # session deleted) that lands while the read is away wins, as it would against a live
    # subscription. Re-proved after it: when a change of access or a deletion moved the grants'
    # epoch meanwhile (or one is running on the agent), the access is checked again on the loop
    # (rare: one read) before anything is answered (tests/server/live/test_server_access_races.py).
    epoch = ctx.grants.epoch
    if ctx.db.traits.batched_reads:
        session, rows, more, context, head, edge = await session_reads_on_loop(
            ctx.db, env.account_id, action.session_id, after, limit, claim=handed_claim.handed())
    else:
        session, rows, more, context, head, edge = await ctx.db.aread(session_reads, env.account_id,
                                                                      action.session_id, after, limit)
    if ctx.grants.moved_since(epoch, session["agentId"]):
        await ctx.grants.settled(session["agentId"])
        session = ctx.db.read(session_for, env.account_id, action.session_id, READER)
    response = {"_": "GetSessionResponse", "session": session}
    if context is not None:   # a session a trigger started (the desktop's trigger card)
        response["triggerContext"] = context
    if edge is not None:
        response["continuation"] = edge
    # (a visitor of the agent, public chat, reads its own session but never the agent's prompt)
    visitor = session.get("visitorId") == env.account_id
    response["systemPromptMarkdown"] = "" if visitor else system_prompt(ctx, session["agentId"])
    room = MAX_ANSWER_BYTES - len(encode(response)) - 64
    size = sum(len(body) for _seq, body in rows)
    while len(rows) > 1 and size > room:   # (an unusually large prompt or trigger context)
        size -= len(rows.pop()[1])
        more = True
    # Stored event bytes go out as they are in CBOR; JSON decodes them on demand.
    response["events"] = RawEvents([bytes(body) for _seq, body in rows])
    if more:
        response["nextAfterSeq"] = rows[-1][0]
    if head is not None and (signed := signed_head(ctx, action.session_id, *head)) is not None:
        response["head"] = signed   # covers the page: a follower checks each page against it
    return response


async def update_session(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()

    def job(conn):
        session = session_for(conn, env.account_id, action.session_id, WRITER)
        if action.model_override is not None:
            override = action.model_override
            check_level(conn, session["account"], override["provider"], override["model"],
                        override.get("reasoningLevel"), "UpdateSession.modelOverride")
        return sessions_q.update_session(conn, action.session_id, now, title=action.title,
                                         set_override=action.set_model_override,
                                         model_override=action.model_override,
                                         set_thoroughness=action.set_thoroughness,
                                         thoroughness=action.thoroughness)

    session = await ctx.db.write(job)
    ctx.broadcaster.publish_session(session)   # with its `session-updated` notice
    return {"_": "UpdateSessionResponse", "session": session}


async def delete_session(ctx: HandlerContext, env, action) -> dict:
    """Stop the live run, then one transaction: the session's live runs end 'canceled', its runs
    keep their history with the session detached, children become top level, the session and
    its events go. Subscribers of sessions/<id> get the notice, then nothing more."""
    session = await ctx.db.aread(session_for, env.account_id, action.session_id, WRITER)
    session_id, agent_id = session["id"], session["agentId"]
    ctx.runtime.abandon_sessions([session_id])
    now = ctx.now_ms()

    def job(conn):
        session_for(conn, env.account_id, session_id, WRITER)  # again: it may have gone meanwhile
        # The session's live runs end with their subtrees; a parent of this session's run is
        # answered 'canceled' (server/store/delegation.py).
        canceled, settled = ctx.runtime.cancel_in(conn, runs_q.active_runs_of_session(conn, session_id), now)
        settled.sessions = [s for s in settled.sessions if s["id"] != session_id]
        children = sessions_q.child_session_ids(conn, session_id)
        sessions_q.delete_session(conn, session_id)
        for member in {session["account"], env.account_id}:
            lifecycle_q.forget_idempotency(conn, member, {session_id})
        agent = agents_q.touch_agent(conn, agent_id, now)
        return canceled, settled, [sessions_q.get_session(conn, c) for c in children], agent

    canceled, settled, children, agent = await ctx.db.write(job)
    ctx.runtime.abandon_sessions([session_id])  # a worker a message started meanwhile
    notice = {"reason": "session-deleted", "agentId": agent_id, "sessionId": session_id}
    ctx.broadcaster.publish_gone("sessions/" + session_id, notice)
    ctx.runtime.publish_runs([{**{k: v for k, v in r.items() if k != "sessionId" or v != session_id}, "title": ""}
                              for r in canceled])
    ctx.runtime.settle(settled)
    ctx.runtime.interrupt_runs(r["id"] for r in canceled if r.get("sessionId") != session_id)
    for child in children:
        if child is not None:
            ctx.broadcaster.publish_change("sessions/" + child["id"], child)
    ctx.broadcaster.publish_change("agents/" + agent_id, agent)
    ctx.broadcaster.notify_account(session["account"], "session-deleted", agent_id=agent_id, session_id=session_id)
    return {"_": "DeleteSessionResponse", "sessionId": session_id, "agentId": agent_id}

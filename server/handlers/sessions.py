"""CreateSession, ListSessions, GetSession, UpdateSession, DeleteSession."""
from __future__ import annotations

from protocol.actions import request_fingerprint
from protocol.blocks import system_prompt_markdown
from server.clock import new_id
from server.handlers.access import own_agent, own_session
from server.handlers.idempotency import once
from server.store import agent_lifecycle as lifecycle_q
from server.store import agents as agents_q
from server.store import events as events_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q
from protocol.wire_values import RawEvents

MAX_EVENTS = 10_000  # server cap on GetSession.limit (CONTRACT section 4)
MAX_RESPONSE_BYTES = 4 << 20  # a page also ends past this many bytes of events (nextAfterSeq says where)
_PROMPT_CACHE_MAX = 10_000


def system_prompt(app, agent_id: str) -> str:
    """An agent's system prompt as Markdown (a block tree converted), cached rather than decoded
    on every GetSession; UpdateAgent and DeleteAgent drop the entry (forget_system_prompt)."""
    cache = app.cache.setdefault("system_prompts", {})
    prompt = cache.get(agent_id)
    if prompt is None:
        agent = app.db.read(agents_q.get_agent, agent_id)
        prompt = system_prompt_markdown((agent or {}).get("definition", {}))
        if len(cache) >= _PROMPT_CACHE_MAX:
            cache.clear()
        cache[agent_id] = prompt
    return prompt


def forget_system_prompt(app, agent_id: str) -> None:
    app.cache.setdefault("system_prompts", {}).pop(agent_id, None)


async def create_session(app, env, action) -> dict:
    now = app.now_ms()
    account_id = env.account_id

    def effect(conn):
        own_agent(conn, account_id, action.agent_id)
        session_id = new_id()
        session = sessions_q.create_session(conn, session_id, account_id, action.agent_id, action.title, now)
        agent = agents_q.touch_agent(conn, action.agent_id, now)
        return {"_": "CreateSessionResponse", "sessionId": session_id}, [(session, agent)]

    def job(conn):
        return once(conn, account_id, "CreateSession", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await app.db.write(job)
    for session, agent in created:
        app.publish_session(session, created=True)
        app.notify_account(account_id, "session-created", agent_id=session["agentId"], session_id=session["id"])
        if agent is not None:
            app.publish_change("agents/" + agent["id"], agent)
    return response


async def list_sessions(app, env, action) -> dict:
    def read(conn):
        if action.agent_id is not None:
            own_agent(conn, env.account_id, action.agent_id)
        if action.parent_session_id is not None:
            own_session(conn, env.account_id, action.parent_session_id)
        sessions, cursor = sessions_q.list_sessions(
            conn, env.account_id, action.agent_id, action.limit or 100, action.cursor,
            parent_session_id=action.parent_session_id, include_children=action.include_children)
        agent_ids = sorted({s["agentId"] for s in sessions})
        agents = [a for a in (agents_q.get_agent(conn, i) for i in agent_ids) if a is not None]
        return sessions, agents, cursor

    sessions, agents, cursor = app.db.read(read)
    response = {"_": "ListSessionsResponse", "sessions": sessions, "agents": agents}
    if cursor is not None:
        response["nextCursor"] = cursor
    return response


async def get_session(app, env, action) -> dict:
    limit = min(action.limit or MAX_EVENTS, MAX_EVENTS)
    after = action.after_seq or 0

    def read(conn):
        session = own_session(conn, env.account_id, action.session_id)
        rows, more = events_q.event_bodies_page(conn, action.session_id, after, limit, MAX_RESPONSE_BYTES)
        return session, rows, more

    session, rows, more = app.db.read(read)
    response = {"_": "GetSessionResponse", "session": session}
    # Stored event bytes go out as they are in CBOR; JSON decodes them on demand.
    response["events"] = RawEvents([bytes(body) for _seq, body in rows])
    response["systemPromptMarkdown"] = system_prompt(app, session["agentId"])
    if more:
        response["nextAfterSeq"] = rows[-1][0]
    return response


async def update_session(app, env, action) -> dict:
    now = app.now_ms()

    def job(conn):
        session = own_session(conn, env.account_id, action.session_id)
        own_agent(conn, env.account_id, session["agentId"])
        return sessions_q.update_session(conn, action.session_id, now, title=action.title,
                                         set_override=action.set_model_override,
                                         model_override=action.model_override)

    session = await app.db.write(job)
    app.publish_session(session)   # with its `session-updated` notice
    return {"_": "UpdateSessionResponse", "session": session}


async def delete_session(app, env, action) -> dict:
    """Stop the live run, then one transaction: the session's live runs end 'canceled', its runs
    keep their history with the session detached, children become top level, the session and
    its events go. Subscribers of sessions/<id> get the notice, then nothing more."""
    session = app.db.read(own_session, env.account_id, action.session_id)
    session_id, agent_id = session["id"], session["agentId"]
    app.runtime.abandon_sessions([session_id])
    now = app.now_ms()

    def job(conn):
        own_session(conn, env.account_id, session_id)  # again: it may have gone meanwhile
        canceled = runs_q.cancel_runs(conn, runs_q.active_runs_of_session(conn, session_id), now)
        children = [row[0] for row in conn.execute(
            "SELECT id FROM sessions WHERE parent_session_id = ?", (session_id,))]
        sessions_q.delete_session(conn, session_id)
        lifecycle_q.forget_idempotency(conn, env.account_id, {session_id})
        agent = agents_q.touch_agent(conn, agent_id, now)
        return canceled, [sessions_q.get_session(conn, c) for c in children], agent

    canceled, children, agent = await app.db.write(job)
    app.runtime.abandon_sessions([session_id])  # a worker a message started meanwhile
    notice = {"reason": "session-deleted", "agentId": agent_id, "sessionId": session_id}
    app.publish_gone("sessions/" + session_id, notice)
    app.runtime.publish_runs([{k: v for k, v in r.items() if k != "sessionId"} for r in canceled])
    for child in children:
        if child is not None:
            app.publish_change("sessions/" + child["id"], child)
    app.publish_change("agents/" + agent_id, agent)
    app.notify_account(session["account"], "session-deleted", agent_id=agent_id, session_id=session_id)
    return {"_": "DeleteSessionResponse", "sessionId": session_id, "agentId": agent_id}

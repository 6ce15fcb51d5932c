"""CreateSession, ListSessions, GetSession."""
from __future__ import annotations

from protocol.actions import request_fingerprint
from protocol.blocks import system_prompt_markdown
from server.app import new_id
from server.handlers.access import own_agent, own_session
from server.handlers.idempotency import once
from server.store import agents as agents_q
from server.store import events as events_q
from server.store import sessions as sessions_q
from server.wire_values import RawEvents

MAX_EVENTS = 10_000  # server cap on GetSession.limit (CONTRACT section 4)
MAX_RESPONSE_BYTES = 4 << 20  # a page also ends past this many bytes of events (nextAfterSeq says where)
_PROMPT_CACHE_MAX = 10_000


def system_prompt(app, agent_id: str) -> str:
    """An agent's system prompt as Markdown (a block tree converted). Definitions never change after CreateAgent (there is no
    update action), so they are cached rather than decoded on every GetSession."""
    cache = app.cache.setdefault("system_prompts", {})
    prompt = cache.get(agent_id)
    if prompt is None:
        agent = app.db.read(agents_q.get_agent, agent_id)
        prompt = system_prompt_markdown((agent or {}).get("definition", {}))
        if len(cache) >= _PROMPT_CACHE_MAX:
            cache.clear()
        cache[agent_id] = prompt
    return prompt


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
        sessions, cursor = sessions_q.list_sessions(conn, env.account_id, action.agent_id,
                                                    action.limit or 100, action.cursor)
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

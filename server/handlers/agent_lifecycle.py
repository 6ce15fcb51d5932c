"""UpdateAgent and DeleteAgent: an agent's definition changes, and an agent goes away whole."""
from __future__ import annotations

import asyncio

from server.handlers.access import own_agent
from server.handlers.agents import check_provider_name
from server.handlers.sessions import forget_system_prompt
from server.runtime.state_dirs import remove_state_dir
from server.store import agent_lifecycle as lifecycle_q
from server.store import agents as agents_q


async def update_agent(app, env, action) -> dict:
    now = app.now_ms()

    def job(conn):
        own_agent(conn, env.account_id, action.agent_id)
        check_provider_name(conn, env.account_id, action.model_provider)
        lifecycle_q.set_definition(conn, action.agent_id, action.definition, now)
        return agents_q.get_agent(conn, action.agent_id)

    agent = await app.db.write(job)
    forget_system_prompt(app, agent["id"])  # the next turn and GetSession read the new one
    app.publish_agent(agent)   # with its `agent-updated` notice
    return {"_": "UpdateAgentResponse", "agent": agent}


async def delete_agent(app, env, action) -> dict:
    """In this order: stop the agent's live runs; delete its sessions, events, runs,
    collaborators and idempotency records in one transaction; remove its state directory; send
    `agent-deleted`. A crash after the commit leaves a directory without a row, which the next
    start removes (runtime.state_dirs); before it, nothing changed."""
    agent = app.db.read(own_agent, env.account_id, action.agent_id)
    agent_id = agent["id"]
    session_ids = app.db.read(lambda conn: [r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE agent_id = ?", (agent_id,))])
    app.runtime.abandon_sessions(session_ids)

    def job(conn):
        own_agent(conn, env.account_id, agent_id)  # again: a concurrent delete may have won
        return lifecycle_q.delete_agent(conn, agent_id)

    deleted_sessions = await app.db.write(job)
    app.runtime.abandon_sessions(deleted_sessions)  # any created after the first look
    forget_system_prompt(app, agent_id)
    await asyncio.to_thread(remove_state_dir, app.config.data_dir, agent["stateDir"])
    for session_id in deleted_sessions:
        key = "sessions/" + session_id
        app.publish_gone(key, {"reason": "session-deleted", "agentId": agent_id, "sessionId": session_id})
    app.publish_gone("agents/" + agent_id, {"reason": "agent-deleted", "agentId": agent_id})
    app.notify_account(agent["account"], "agent-deleted", agent_id=agent_id)
    return {"_": "DeleteAgentResponse", "agentId": agent_id}

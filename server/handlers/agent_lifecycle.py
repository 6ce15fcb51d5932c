"""UpdateAgent and DeleteAgent: an agent's definition changes, and an agent goes away whole."""
from __future__ import annotations

import asyncio

from ..runtime.state_dirs import remove_state_dir
from ..store import agent_lifecycle as lifecycle_q
from ..store import agents as agents_q
from ..store import collaborators as collab_q
from ..store import sessions as sessions_q
from .access import OWNER, WRITER, agent_for
from .agent_definition import check_definition
from .agents import check_provider_name
from .context import HandlerContext
from .pages import AGENT_SESSIONS
from .sessions import forget_system_prompt


async def update_agent(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()

    def job(conn):
        agent = agent_for(conn, env.account_id, action.agent_id, WRITER)
        # The owner's providers: turns of a shared agent run on the owner's account.
        check_provider_name(conn, agent["account"], action.model_provider)
        check_definition(conn, agent["account"], action.definition, agent["definition"], agent["accessRole"])
        lifecycle_q.set_definition(conn, action.agent_id, action.definition, now)
        return agents_q.get_agent(conn, action.agent_id, OWNER), agent["accessRole"]

    agent, role = await ctx.db.write(job)
    forget_system_prompt(ctx, agent["id"])  # the next turn and GetSession read the new one
    ctx.broadcaster.publish_agent(agent)   # with its `agent-updated` notice
    # The reference's answer, GetAgentResponse: the desktop writes it into its agent cache.
    sessions = await ctx.db.aread(sessions_q.sessions_of_agent, agent["id"], AGENT_SESSIONS, large=True)
    return {"_": "GetAgentResponse", "agent": agents_q.as_seen_by(agent, role), "sessions": sessions}


async def delete_agent(ctx: HandlerContext, env, action) -> dict:
    """In this order: stop the agent's live runs; delete its sessions, events, runs,
    collaborators and idempotency records in one transaction; remove its state directory; send
    `agent-deleted`. A crash after the commit leaves a directory without a row, which the next
    start removes (runtime.state_dirs); before it, nothing changed."""
    agent = ctx.db.read(agent_for, env.account_id, action.agent_id, OWNER)
    agent_id = agent["id"]
    session_ids = ctx.db.read(sessions_q.session_ids_of_agent, agent_id)
    ctx.runtime.abandon_sessions(session_ids)
    why = f"agent {agent_id} was deleted"

    async with ctx.grants.changing(agent_id):
        members = ctx.db.read(collab_q.members, agent_id)   # who hears of it, read before it goes
        with ctx.grants.leaving(agent_id, ["*"]):
            ctx.grants.cut_agent(agent_id, why)   # guests' subscriptions end before the write

            def job(conn):
                agent_for(conn, env.account_id, agent_id, OWNER)  # again: a concurrent delete may have won
                return lifecycle_q.delete_agent(conn, agent_id)

            deleted_sessions = await ctx.db.write(job)
            ctx.grants.cut_agent(agent_id, why)
    ctx.runtime.abandon_sessions(deleted_sessions)  # any created after the first look
    forget_system_prompt(ctx, agent_id)
    await asyncio.to_thread(remove_state_dir, ctx.config.data_dir, agent["stateDir"])
    for session_id in deleted_sessions:
        key = "sessions/" + session_id
        ctx.broadcaster.publish_gone(key, {"reason": "session-deleted", "agentId": agent_id, "sessionId": session_id})
    ctx.broadcaster.publish_gone("agents/" + agent_id, {"reason": "agent-deleted", "agentId": agent_id})
    ctx.broadcaster.notify_account(agent["account"], "agent-deleted", agent_id=agent_id)
    for account, (_role, status) in members.items():
        ctx.broadcaster.notify_only(account, "agent-deleted" if status == "accepted" else "agent-invites-changed",
                        agent_id=agent_id)
    return {"_": "DeleteAgentResponse", "agentId": agent_id}

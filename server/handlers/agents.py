"""CreateAgent, GetAgent, ListAgents."""
from __future__ import annotations

import os

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.agent.providers import BUILTIN_PROVIDER, BUILTIN_TYPES

from ..clock import new_id
from ..runtime.state_dirs import make_state_dir
from ..store import agents as agents_q
from ..store import collaborators as collab_q
from ..store import providers as providers_q
from ..store import sessions as sessions_q
from ..store import trigger_firings as firings_q
from . import public_chat
from .access import READER, VISITOR, agent_for, agent_role
from .agent_definition import check_definition
from .context import HandlerContext
from .idempotency import once
from .pages import AGENT_SESSIONS, AGENTS_PAGE, MAX_ANSWER_BYTES

BUILTIN_PROVIDERS = BUILTIN_TYPES   # every account has them (protocol/agent/providers.py)


def check_provider_name(conn, account_id: str, name: str) -> None:
    if name in BUILTIN_PROVIDERS or providers_q.get_provider(conn, account_id, name) is not None:
        return
    raise ProtocolError(400, f"definition.modelProvider {quote(name)} is not a provider of this account "
                             f"(set it with `seed-agents providers set {name} ...` or the desktop's provider "
                             f"settings, or use the built-in {quote(BUILTIN_PROVIDER)})")


async def create_agent(ctx: HandlerContext, env, action) -> dict:
    definition = action.definition
    now = ctx.now_ms()
    account_id = env.account_id

    def effect(conn):
        check_provider_name(conn, account_id, definition["modelProvider"])
        check_definition(conn, account_id, definition)
        agent_id = new_id()
        state_dir = os.path.join(ctx.config.data_dir, "agents", agent_id)
        agent = agents_q.create_agent(conn, agent_id, account_id, definition, state_dir, now)
        return {"_": "CreateAgentResponse", "agentId": agent_id}, [agent]

    def job(conn):
        return once(conn, account_id, "CreateAgent", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await ctx.db.write(job)
    for agent in created:
        # After the commit: a crash in between leaves a row without its directory, which the
        # next start makes (seed_agents.server.runtime.state_dirs).
        make_state_dir(ctx.config.data_dir, agent["stateDir"])
        ctx.broadcaster.publish_agent(agent, created=True)
        ctx.broadcaster.notify_account(account_id, "agent-created", agent_id=agent["id"])
    return response


async def get_agent(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        if agent_role(conn, env.account_id, action.agent_id) == VISITOR:   # a minimal view (public chat)
            return public_chat.visitor_agent(conn, env.account_id, action.agent_id, AGENT_SESSIONS, ctx.now_ms())
        agent = agent_for(conn, env.account_id, action.agent_id, READER)
        sessions = sessions_q.sessions_of_agent(conn, action.agent_id, AGENT_SESSIONS)
        if agent["accessRole"] != "owner":   # (visitors' sessions are theirs and the owner's alone)
            sessions = [s for s in sessions if "visitorId" not in s]
        public_chat.add_usage(conn, agent, env.account_id, ctx.now_ms())
        firings_q.attribute_sessions(conn, sessions)   # startedByTrigger (triggers)
        return agent, sessions

    # Off the event loop: the definition (up to 256 KiB) and 1000 sessions are decoded there.
    agent, sessions = await ctx.db.aread(read, large=True)
    return {"_": "GetAgentResponse", "agent": agent, "sessions": sessions}


async def list_agents(ctx: HandlerContext, env, action) -> dict:
    """One page of the caller's own agents and those shared with it (accepted grants only; a
    public agent of another account is never listed): at most `limit` (default and cap 1000),
    ending before the answer passes 4 MiB; `nextCursor` when more remain (an addition a Seed
    client ignores: docs/protocol.md)."""
    agents, cursor = await ctx.db.aread(
        collab_q.agents_page, env.account_id, action.limit or AGENTS_PAGE, action.cursor,
        MAX_ANSWER_BYTES, large=True)
    response = {"_": "ListAgentsResponse", "agents": agents}
    if cursor is not None:
        response["nextCursor"] = cursor
    return response

"""CreateAgent, GetAgent, ListAgents."""
from __future__ import annotations

import os

from protocol.actions import request_fingerprint
from protocol.errors import ProtocolError, quote
from server.clock import new_id
from server.handlers.access import own_agent
from server.handlers.idempotency import once
from server.runtime.state_dirs import make_state_dir
from server.store import agents as agents_q
from server.store import providers as providers_q
from server.store import sessions as sessions_q

BUILTIN_PROVIDERS = {"echo"}


def check_provider_name(conn, account_id: str, name: str) -> None:
    if name in BUILTIN_PROVIDERS or providers_q.get_provider(conn, account_id, name) is not None:
        return
    raise ProtocolError(400, f"definition.modelProvider {quote(name)} is not a provider of this account "
                             "(set it with SetModelProvider, or use the built-in 'echo')")


async def create_agent(app, env, action) -> dict:
    definition = action.definition
    now = app.now_ms()
    account_id = env.account_id

    def effect(conn):
        check_provider_name(conn, account_id, definition["modelProvider"])
        agent_id = new_id()
        state_dir = os.path.join(app.config.data_dir, "agents", agent_id)
        agent = agents_q.create_agent(conn, agent_id, account_id, definition, state_dir, now)
        return {"_": "CreateAgentResponse", "agentId": agent_id}, [agent]

    def job(conn):
        return once(conn, account_id, "CreateAgent", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await app.db.write(job)
    for agent in created:
        # After the commit: a crash in between leaves a row without its directory, which the
        # next start makes (server.runtime.state_dirs).
        make_state_dir(app.config.data_dir, agent["stateDir"])
        app.publish_agent(agent, created=True)
        app.notify_account(account_id, "agent-created", agent_id=agent["id"])
    return response


async def get_agent(app, env, action) -> dict:
    def read(conn):
        agent = own_agent(conn, env.account_id, action.agent_id)
        return agent, sessions_q.sessions_of_agent(conn, action.agent_id, 1000)

    agent, sessions = app.db.read(read)
    return {"_": "GetAgentResponse", "agent": agent, "sessions": sessions}


async def list_agents(app, env, action) -> dict:
    agents = app.db.read(agents_q.list_agents, env.account_id)
    return {"_": "ListAgentsResponse", "agents": agents}

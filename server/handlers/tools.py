"""ListAgentTools, SaveAgentTool, DeleteAgentTool: the tool documents an agent holds.

Listing brings the agent's builtin documents and MCP projections up to date first (a write only
when a CID changed), as the reference does on every listing and at every run start. Rows belong
to the agent's owner, whoever asks. `granted` says whether the agent's grants offer the tool: a
builtin (a callable of the registry) when `definition.tools` names it (or has no list at all),
`execute` only while the code sandbox runs (it passed its self-check); an authored or MCP tool
always. A tool is offered to the model when it is granted and enabled.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.agent.tool_documents import tool_info

from ..store import tool_documents as tools_q
from ..tools.agent_tools import granted
from .access import READER, WRITER, agent_for
from .context import HandlerContext


def infos(ctx: HandlerContext, agent: dict, rows: list[dict]) -> list[dict]:  # noqa: ANN001
    definition = agent["definition"]
    code_exec = ctx.runtime is not None and ctx.runtime.code is not None
    return [tool_info(r["doc"], r["cid"], r["enabled"], granted(definition, r["doc"], code_exec), r["createdAt"],
                      r["updatedAt"]) for r in rows]


async def list_agent_tools(ctx: HandlerContext, env, action) -> dict:
    now = ctx.now_ms()

    def job(conn):
        agent = agent_for(conn, env.account_id, action.agent_id, READER)
        tools_q.refresh(conn, agent, now)
        return agent, tools_q.list_documents(conn, agent["account"], agent["id"])

    agent, rows = await ctx.db.write(job)
    return {"_": "ListAgentToolsResponse", "agentId": agent["id"], "tools": infos(ctx, agent, rows)}


async def save_agent_tool(ctx: HandlerContext, env, action) -> dict:
    """An authored (lambda) tool is created or replaced; a builtin or MCP tool is switched on or
    off. A lambda is stored even where this server cannot run it (health: codeExec false):
    calling it then fails with that reason."""
    now = ctx.now_ms()

    def job(conn):
        agent = agent_for(conn, env.account_id, action.agent_id, WRITER)
        account = agent["account"]
        tools_q.refresh(conn, agent, now)
        if action.doc is None:
            row = tools_q.set_enabled(conn, account, agent["id"], action.name, action.enabled, now)
            if row is None:
                raise ProtocolError(404, f"tool {quote(action.name)} not found for this agent")
        else:
            row = tools_q.save_lambda(conn, account, agent["id"], action.doc, action.enabled,
                                      action.previous_name, now)
        return agent, row

    agent, row = await ctx.db.write(job)
    ctx.broadcaster.notify_account(agent["account"], "agent-updated", agent_id=agent["id"])
    return {"_": "SaveAgentToolResponse", "agentId": agent["id"], "tool": infos(ctx, agent, [row])[0]}


async def delete_agent_tool(ctx: HandlerContext, env, action) -> dict:
    def job(conn):
        agent = agent_for(conn, env.account_id, action.agent_id, WRITER)
        return agent, tools_q.delete_lambda(conn, agent["account"], agent["id"], action.name)

    agent, deleted = await ctx.db.write(job)
    if deleted:
        ctx.broadcaster.notify_account(agent["account"], "agent-updated", agent_id=agent["id"])
    return {"_": "DeleteAgentToolResponse", "agentId": agent["id"], "name": action.name, "deleted": deleted}

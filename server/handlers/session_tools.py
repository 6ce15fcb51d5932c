"""InvokeSessionTool: the user runs one verb (read, write, call) on a session's shared log.

The verb runs as that person (server/tools/authority.py): their account and their role on the
agent, within the agent's grants, through the agent's own tool surface (built as every entry
point's is, server/runtime/tool_context.py): memory, ~/tools, web pages, the callables it holds,
its MCP tools; a bad input is answered with the verb's contract, as for the model. `read` needs
read access; `write` and `call` need write access (a reader cannot change anything).

What a call leaves: for a writer or the owner, a `tool_call` and a `tool_result` with
`actor: "user"` (and the signer in `meta`), appended in one transaction after the verb ran, for the
people who read the session; the model is not handed them (server/runtime/history.py: a person's
use of a verb is not a step of the model's to replay; what it changed, such as a memory file, the
agent sees where it lives); refused (409) while the session has a live run, as the
reference does (the log is not written under a running turn). A reader's read leaves nothing in
the owner's log: it is answered (`resultEventId: ""`) and forgotten. Either way the output is cut to
`--max-tool-output-chars` (server/tools/records.py), as the model's is. A verb still running
after `--tool-timeout` is stopped and answered with an error, as the model's calls are.
"""
from __future__ import annotations

import asyncio
import json
import time

from seed_agents.protocol.api.actions_tools import WRITE_VERBS
from seed_agents.protocol.wire.errors import ProtocolError

from ..clock import new_id
from ..providers.base import ToolCall
from ..store import agents as agents_q
from ..runtime import turns
from ..store import runs as runs_q
from ..store import tool_events
from ..tools import records
from ..tools.authority import may_write
from ..tools.context import ToolResult
from .access import READER, VISITOR, VISITOR_ONLY, WRITER, session_for, session_role
from .context import HandlerContext


async def run_verb(ctx: HandlerContext, agent: dict, session_id: str, call_id: str, verb: str, value, account: str,  # noqa: ANN001
                   role: str) -> tuple[object, str | None]:
    """(output, error) of one verb run as the person `account` with `role` on the agent."""
    surface = await ctx.runtime.user_surface(agent, session_id, account, role)
    limit = ctx.config.tool_timeout   # as for the model's calls: abandoned past --tool-timeout
    try:
        async with asyncio.timeout(limit):
            result = await surface.run(ToolCall(call_id, verb, json.dumps(value, ensure_ascii=False, default=str)))
    except TimeoutError:
        return None, f"{verb} did not finish within {limit:g} s (--tool-timeout); it was stopped"
    if result.park is not None:   # (no verb a person runs parks; said rather than hung)
        return None, f"{verb} cannot wait here"
    return result.output, result.error


async def invoke_session_tool(ctx: HandlerContext, env, action) -> dict:
    need = WRITER if action.verb in WRITE_VERBS else READER

    def check(conn):
        session = session_for(conn, env.account_id, action.session_id, need)
        role = session_role(conn, env.account_id, session["id"])[0]
        if role == VISITOR:   # a visitor chats; the owner's tools run only through the agent's turn
            raise ProtocolError(403, VISITOR_ONLY)
        if may_write(role) and runs_q.has_active_run(conn, session["id"]):
            raise ProtocolError(409, "the session has a live run; invoke tools once it has finished")
        return session, role, agents_q.get_agent(conn, session["agentId"])

    session, role, agent = await ctx.db.aread(check)
    started = time.perf_counter()
    call_id = new_id()
    output, error = await run_verb(ctx, agent, session["id"], call_id, action.verb, action.input, env.account_id,
                                   role)
    limit = ctx.config.max_tool_output_chars
    meta = {"accountId": env.account_id, "signerId": env.signer_id,
            "durationMs": int((time.perf_counter() - started) * 1000)}
    result = records.result_event(call_id, action.verb, ToolResult(output, error), "user", limit, meta)
    # (resultEventId is "" when nothing was recorded: a reader's call)
    response: dict = {"_": "InvokeSessionToolResponse", "sessionId": session["id"], "resultEventId": ""}
    if "error" in result:
        response["error"] = result["error"]
    elif result.get("output") is not None:
        response["output"] = result["output"]
    if not may_write(role):
        return response   # a reader's call leaves nothing in the owner's log

    now = ctx.now_ms()

    def job(conn):
        session_for(conn, env.account_id, session["id"], need)   # still there, still allowed
        agent_now = agents_q.get_agent(conn, session["agentId"])
        return tool_events.record(conn, session["id"], [records.call_event(call_id, action.verb, action.input, "user"),
                                                        result], now, new_id,
                                  notice=(agent_now["account"], agent_now["id"]) if agent_now is not None else None)

    effects = await ctx.db.write(job)
    turns.publish(ctx.broadcaster, None, effects)
    response["resultEventId"] = effects.appended[-1][1]["id"]
    return response

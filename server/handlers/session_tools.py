"""InvokeSessionTool: the user runs one verb (read, write, call) on a session's shared log.

The call and its result are appended as `tool_call` and `tool_result` events with
`actor: "user"` (and the signer in `meta`), in one transaction after the verb ran, so the agent
reads them on its next turn. `read` needs read access; `write` and `call` need write access (a
reader cannot change anything through the palette). Refused (409) while the session has a live
run, as the reference does: the log is not written under a running turn.

The verb runs through the agent's own tool surface (server/tools/surface.py), as its model would
run it: memory, ~/tools, web pages, the callables it holds, its MCP tools; a bad input is
answered with the verb's contract, as for the model. A verb still running after `--tool-timeout`
is stopped and answered with an error, as the model's calls are.
"""
from __future__ import annotations

import asyncio
import json
import time

from seed_agents.protocol.actions_tools import WRITE_VERBS
from seed_agents.protocol.errors import ProtocolError

from ..clock import new_id
from ..providers.base import ToolCall
from ..store import agents as agents_q
from ..store import events as events_q
from ..store import runs as runs_q
from .access import READER, WRITER, session_for


async def run_verb(app, agent: dict, session_id: str, call_id: str, verb: str, value) -> tuple[object, str | None]:  # noqa: ANN001
    """(output, error) of one verb run as the user, through the agent's own tool surface."""
    surface = await app.runtime.user_surface(agent, session_id)
    limit = app.config.tool_timeout   # as for the model's calls: abandoned past --tool-timeout
    try:
        async with asyncio.timeout(limit):
            result = await surface.run(ToolCall(call_id, verb, json.dumps(value, ensure_ascii=False, default=str)))
    except TimeoutError:
        return None, f"{verb} did not finish within {limit:g} s (--tool-timeout); it was stopped"
    if result.park is not None:   # (no verb a person runs parks; said rather than hung)
        return None, f"{verb} cannot wait here"
    return result.output, result.error


async def invoke_session_tool(app, env, action) -> dict:
    need = WRITER if action.verb in WRITE_VERBS else READER

    def check(conn):
        session = session_for(conn, env.account_id, action.session_id, need)
        if runs_q.active_runs_of_session(conn, session["id"]):
            raise ProtocolError(409, "the session has a live run; invoke tools once it has finished")
        return session, agents_q.get_agent(conn, session["agentId"])

    session, agent = await app.db.aread(check)
    started = time.perf_counter()
    call_id = new_id()
    output, error = await run_verb(app, agent, session["id"], call_id, action.verb, action.input)
    now = app.now_ms()
    meta = {"accountId": env.account_id, "signerId": env.signer_id,
            "durationMs": int((time.perf_counter() - started) * 1000)}
    result: dict = {"type": "tool_result", "toolCallId": call_id, "name": action.verb, "actor": "user", "meta": meta}
    if error is not None:
        result["error"] = error
    else:
        result["output"] = output

    def job(conn):
        session_for(conn, env.account_id, session["id"], need)   # still there, still allowed
        call = events_q.append_event(conn, session["id"], {"type": "tool_call", "id": call_id, "name": action.verb,
                                                           "input": action.input, "actor": "user"}, new_id(), now)
        answer = events_q.append_event(conn, session["id"], result, new_id(), now)
        return call, answer, agents_q.get_agent(conn, session["agentId"])

    call, answer, agent_now = await app.db.write(job)
    for event, body in (call, answer):
        app.publish_append(session["id"], event, body)
    if agent_now is not None:
        app.notify_account(agent_now["account"], "session-event", agent_id=agent_now["id"], session_id=session["id"])
    response: dict = {"_": "InvokeSessionToolResponse", "sessionId": session["id"], "resultEventId": answer[0]["id"]}
    if error is not None:
        response["error"] = error
    elif output is not None:
        response["output"] = output
    return response

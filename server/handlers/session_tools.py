"""InvokeSessionTool: the user runs one verb (read, write, call) on a session's shared log.

The call and its result are appended as `tool_call` and `tool_result` events with
`actor: "user"` (and the signer in `meta`), in one transaction after the verb ran, so the agent
reads them on its next turn. `read` needs read access; `write` and `call` need write access (a
reader cannot change anything through the palette). Refused (409) while the session has a live
run, as the reference does: the log is not written under a running turn.

The verbs run through `server.runtime.verbs` when the tool loop provides them; this module adds
what delegation and tools own: reading a tool document (`~/tools/<name>`) and calling an MCP tool
(`call` with `<server>__<tool>`).
"""
from __future__ import annotations

import time

from protocol.errors import ProtocolError, quote
from protocol.actions_tools import WRITE_VERBS
from protocol.tool_documents import MCP_SEPARATOR
from server.clock import new_id
from server.handlers.access import READER, WRITER, session_for
from server.mcp.calls import call_mcp_tool
from server.store import agents as agents_q
from server.store import events as events_q
from server.store import runs as runs_q
from server.store import tool_documents as tools_q


async def run_verb(app, agent: dict, verb: str, value) -> tuple[object, str | None]:  # noqa: ANN001
    """(output, error) of one verb run as the user, for the agent's owner's data."""
    if verb == "read" and type(value) is dict and type(value.get("address")) is str \
            and value["address"].startswith("~/tools/"):
        name = value["address"][len("~/tools/"):]
        row = app.db.read(tools_q.get_document, agent["account"], agent["id"], name)
        if row is None:
            return None, f"no tool {quote(name)} in ~/tools"
        return {"cid": row["cid"], "enabled": row["enabled"], "document": row["doc"]}, None
    if verb == "call" and type(value) is dict and type(value.get("tool")) is str and MCP_SEPARATOR in value["tool"]:
        return await call_mcp_tool(app.db, app.secrets, app.config, agent["account"], agent["id"], value["tool"],
                                   value.get("input", {}))
    verbs = getattr(app.runtime, "verbs", None)
    if verbs is None:
        return None, f"the {verb} verb cannot act on that input on this server"
    return await verbs.invoke_as_user(agent, verb, value)


async def invoke_session_tool(app, env, action) -> dict:
    need = WRITER if action.verb in WRITE_VERBS else READER

    def check(conn):
        session = session_for(conn, env.account_id, action.session_id, need)
        if runs_q.active_runs_of_session(conn, session["id"]):
            raise ProtocolError(409, "the session has a live run; invoke tools once it has finished")
        return session, agents_q.get_agent(conn, session["agentId"])

    session, agent = await app.db.aread(check)
    started = time.perf_counter()
    output, error = await run_verb(app, agent, action.verb, action.input)
    now = app.now_ms()
    call_id = new_id()
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

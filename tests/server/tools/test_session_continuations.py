"""Issue 36, session continuations: the model's `continue_session` makes one successor session of
the same agent, linked both ways (SessionInfo.continuedFromSessionId / continuedBySessionId),
recorded with its manifest (GetSession's `continuation`: the handoff and sources loaded, the
predecessor's transcript and plan left cold), and started at once from the handoff alone. A
retried call, or a second one, answers the same successor. A delegated child is not offered the
verb. The CLI's `history` shows the links.

A server child process on a real socket, SQLite and PostgreSQL; the scripted fake model plays each
run by the first message it is handed and records what each was sent."""
from __future__ import annotations

import json

import pytest

from seed_agents.clients.keyfile import write_key

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.clients.test_cli_commands import cli_env, run_cli
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

HANDOFF = "Goal: compare the two kite species.\nDone: the red kite.\nLeft: the black kite, then the table."
SOURCES = ["hm://z6MkExample/kites", "~/memory/notes/kites.md"]


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


def model(request) -> Script:
    body = request.body or {}
    first, answered = first_user(body), len(tool_messages(body))
    if "long talk" in first:
        if answered == 0:     # the first call, its retry (the same call id) and a second call
            cont = {"handoff": HANDOFF, "title": "Kites, part two", "reason": "the thread got long",
                    "sources": SOURCES}
            return Script(chunks=["Handing over."], tool_calls=[
                call("k1", "continue_session", cont), call("d1", "delegate", {"brief": "child: try to continue"})])
        if answered == 2:
            return Script(chunks=[], tool_calls=[call("k1", "continue_session", {"handoff": "again"}),
                                                 call("k2", "continue_session", {"handoff": "another"})])
        return Script(chunks=["It continues in the new session."])
    if first.startswith("child"):
        if answered == 0:
            return Script(chunks=[], tool_calls=[call("c1", "continue_session", {"handoff": "mine"})])
        return Script(chunks=["child done"])
    return Script(chunks=["carrying on"])


async def test_continue_session_makes_one_linked_successor_from_its_manifest(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = model
            kp = keypair("continuations")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            await c.call(kp, {"_": "UpdateSession", "sessionId": sid, "title": "Kites"})
            sent = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("a long talk")})

            async def both_done():
                got = await c.call(kp, {"_": "GetSession", "sessionId": sid})
                successor = got["session"].get("continuedBySessionId")
                if got["session"]["status"] == "streaming" or successor is None:
                    return None
                runs = (await c.call(kp, {"_": "ListRuns", "sessionId": successor}))["runs"]
                return (got, successor) if runs and runs[0]["status"] == "succeeded" else None

            got, successor = await until(both_done, 60, step=0.1, what="the turn and its successor's")
            results = {e["event"]["toolCallId"]: e["event"] for e in got["events"]
                       if e["event"].get("type") == "tool_result"}
            answers = [r for r in got["events"] if r["event"].get("type") == "tool_result"
                       and r["event"]["name"] == "continue_session"]
            assert len(answers) == 3
            first = answers[0]["event"]["output"]
            assert first["status"] == "continued" and first["sessionId"] == successor
            assert first["title"] == "Kites, part two" and first["address"] == f"thread:{successor}"
            # the retried call (the same id) and a second call: the same successor, nothing new
            assert [a["event"]["output"]["sessionId"] for a in answers[1:]] == [successor, successor]
            sessions = (await c.call(kp, {"_": "ListSessions", "agentId": agent_id}))["sessions"]
            assert sorted(s["id"] for s in sessions if "parentSessionId" not in s) == sorted([sid, successor])
            # the child was not offered the verb, and said why
            assert "not offered here" in (await child_answer(c, kp, results))

            # linked both ways; the manifest says what was loaded and what was left cold
            after = await c.call(kp, {"_": "GetSession", "sessionId": successor})
            info = after["session"]
            assert info["continuedFromSessionId"] == sid and "continuedBySessionId" not in info
            assert info["title"] == "Kites, part two" and "parentSessionId" not in info
            edge = after["continuation"]
            assert (edge["predecessorSessionId"], edge["originSessionId"], edge["toolCallId"], edge["runId"]) == \
                (sid, sid, "k1", sent["runId"])
            assert edge["reason"] == "the thread got long"
            user_event = next(e for e in got["events"] if e["event"].get("role") == "user")
            assert edge["eventId"] == user_event["id"]
            manifest = edge["manifest"]
            assert manifest["handoff"] == HANDOFF and manifest["sources"] == SOURCES
            assert manifest["loaded"] == [{"kind": "handoff", "chars": len(HANDOFF)}, {"kind": "sources", "count": 2}]
            assert manifest["cold"][0]["kind"] == "thread" and manifest["cold"][0]["address"] == f"thread:{sid}"
            assert manifest["cold"][0]["events"] == user_event["seq"]   # (what the log held at the call)
            assert "continuation" not in got   # the predecessor is no successor

            # the successor started from the handoff, as the server's message, and nothing else
            opening = after["events"][0]["event"]
            assert (opening["role"], opening["actor"]) == ("user", "system")
            assert HANDOFF in opening["content"] and all(s in opening["content"] for s in SOURCES)
            asked = [r.body for r in fake.requests if "<session_continuation>" in first_user(r.body or {})]
            assert asked, "the successor's model was never asked"
            seen = json.dumps(asked[0]["messages"])
            assert "a long talk" not in seen and "Handing over." not in seen
            names = [t["function"]["name"] for t in asked[0]["tools"]]
            assert "continue_session" in names
            assert after["events"][-1]["event"]["content"] == "carrying on"

            # the CLI's history shows the links
            env = cli_env(tmp_path, srv.url)
            write_key(tmp_path / "key.json", kp)
            code, out, err = await run_cli(env, "history", sid)
            assert code == 0, err
            assert f"· continue_session \"Kites, part two\" → continues in session {successor}" in out
            assert out.splitlines()[-1] == f"(continues in session {successor})"
            code, out, err = await run_cli(env, "history", successor)
            assert code == 0, err
            assert out.splitlines()[0] == f"(continued from session {sid})"
            assert out.splitlines()[1].startswith("#1 server: <session_continuation>")

            # deletion detaches: the successor keeps its starting point, the links to a deleted
            # session go
            assert (await c.call(kp, {"_": "DeleteSession", "sessionId": sid}))["_"] == "DeleteSessionResponse"
            after = await c.call(kp, {"_": "GetSession", "sessionId": successor})
            assert "continuedFromSessionId" not in after["session"]
            assert after["continuation"]["predecessorSessionId"] == sid
            await c.close()
    finally:
        srv.kill()


async def child_answer(c, kp, results: dict) -> str:
    child = results["d1"]["output"]["sessionId"]
    events = (await c.call(kp, {"_": "GetSession", "sessionId": child}))["events"]
    answer = next(e["event"] for e in events if e["event"].get("type") == "tool_result")
    assert answer["name"] == "continue_session"
    return answer["error"]


async def test_an_agent_that_keeps_continuing_itself_stops(tmp_path, storage_flags):
    """Each successor's model continues at once: the chain ends after MAX_CHAIN successors of its
    origin, the last call answered why, and nothing more is started."""
    from seed_agents.protocol.agent.continuations import MAX_CHAIN

    def relay(request) -> Script:
        body = request.body or {}
        if len(tool_messages(body)) == 0:
            return Script(chunks=[], tool_calls=[call("k", "continue_session", {"handoff": "keep going"})])
        return Script(chunks=["passed on"])

    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = relay
            kp = keypair("continuation chain")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("start the chain")})

            async def chain_end():
                current = sid
                for _ in range(MAX_CHAIN + 2):
                    got = await c.call(kp, {"_": "GetSession", "sessionId": current})
                    nxt = got["session"].get("continuedBySessionId")
                    if nxt is None:
                        refused = [e["event"] for e in got["events"] if e["event"].get("type") == "tool_result"
                                   and "error" in e["event"]]
                        return (current, refused) if refused and got["session"]["status"] == "idle" else None
                    current = nxt
                return None

            last, refused = await until(chain_end, 120, step=0.2, what="the chain's end")
            assert f"already continued {MAX_CHAIN} times from thread:{sid}" in refused[0]["error"]
            sessions = (await c.call(kp, {"_": "ListSessions", "agentId": agent_id, "limit": 100}))["sessions"]
            assert len(sessions) == MAX_CHAIN + 1
            edge = (await c.call(kp, {"_": "GetSession", "sessionId": last}))["continuation"]
            assert edge["originSessionId"] == sid
            await c.close()
    finally:
        srv.kill()

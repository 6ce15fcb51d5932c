"""Issue 36, a session's thoroughness (quick, normal or deep) picks the delegation preset its turns
run under: UpdateSession sets and clears it (SessionInfo.thoroughness), a bad value is 400; a quick
conversation's children cannot delegate further and it has at most 3 of them; a deep one keeps the
server's limits; each is told the model where delegation is described; the preset holds in the
whole tree (a child's session carries none of its own).

A server child process on a real socket, SQLite and PostgreSQL; the scripted fake model plays
each run by the first message it is handed and records what each was sent."""
from __future__ import annotations

import pytest

from seed_agents.protocol.wire.envelope import NULL
from seed_agents.protocol.agent.thoroughness import PRESETS

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair


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
    if first == "fan out":     # four children at once, each of which tries to delegate again
        if answered == 0:
            return Script(chunks=[], tool_calls=[call(f"d{i}", "delegate", {"title": f"part {i}",
                                                                         "brief": f"child {i}: go deeper"})
                                                 for i in range(4)])
        return Script(chunks=["fanned out"])
    if first.startswith("child"):
        if answered == 0:
            return Script(chunks=[], tool_calls=[call("g", "delegate", {"brief": "grandchild: look"})])
        return Script(chunks=["child done"])
    return Script(chunks=["grandchild done"])


def delegate_description(body: dict) -> str:
    return next(t["function"]["description"] for t in body["tools"] if t["function"]["name"] == "delegate")


async def test_thoroughness_picks_the_delegation_preset(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = model
            kp = keypair("thoroughness")
            c = await V2Client.open(srv.url)
            agent_id, quick = await agent_session(c, kp, "custom", fake.base_url)

            # set, refused, cleared
            r = await c.call(kp, {"_": "UpdateSession", "sessionId": quick, "thoroughness": "thorough"})
            assert (r["_"], r["status"]) == ("Error", 400) and "quick, normal, deep" in r["message"]
            r = await c.call(kp, {"_": "UpdateSession", "sessionId": quick, "thoroughness": "deep"})
            assert r["session"]["thoroughness"] == "deep"
            r = await c.call(kp, {"_": "UpdateSession", "sessionId": quick, "thoroughness": NULL})
            assert r["_"] == "UpdateSessionResponse" and "thoroughness" not in r["session"], r
            r = await c.call(kp, {"_": "UpdateSession", "sessionId": quick, "thoroughness": "quick"})
            assert r["session"]["thoroughness"] == "quick"
            assert (await c.call(kp, {"_": "GetSession", "sessionId": quick}))["session"]["thoroughness"] == "quick"
            deep = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            await c.call(kp, {"_": "UpdateSession", "sessionId": deep, "thoroughness": "deep"})

            async def tree_of(session_id: str) -> list[dict]:
                root = (await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                                          "content": text("fan out")}))["runId"]

                async def ended():
                    runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
                    done = all(r["status"] in ("succeeded", "failed", "canceled") for r in runs)
                    return runs if done and any(r["id"] == root for r in runs) else None

                return await until(ended, 90, step=0.1, what=f"the tree of {session_id}")

            async def answers(session_id: str) -> dict:
                events = (await c.call(kp, {"_": "GetSession", "sessionId": session_id}))["events"]
                return {e["event"]["toolCallId"]: e["event"] for e in events if e["event"].get("type") == "tool_result"}

            # quick: three children, and none of them may delegate further
            runs = await tree_of(quick)
            assert sorted(r["depth"] for r in runs) == [0, 1, 1, 1]
            got = await answers(quick)
            assert "at most 3 children (this conversation is set to quick)" in got["d3"]["error"]
            for i in range(3):
                child = got[f"d{i}"]["output"]["sessionId"]
                assert "thoroughness" not in (await c.call(kp, {"_": "GetSession", "sessionId": child}))["session"]
                deeper = (await answers(child))["g"]
                assert "at most 1 levels deep (this conversation is set to quick)" in deeper["error"]
            told = [r.body for r in fake.requests if first_user(r.body or {}) == "fan out"]
            assert PRESETS["quick"].guidance in delegate_description(told[0])

            # deep: the server's limits, every child delegates once more
            seen = len(fake.requests)
            runs = await tree_of(deep)
            assert sorted(r["depth"] for r in runs) == [0, 1, 1, 1, 1, 2, 2, 2, 2]
            told = [r.body for r in fake.requests[seen:] if first_user(r.body or {}) == "fan out"]
            assert PRESETS["deep"].guidance in delegate_description(told[0])
            assert PRESETS["quick"].guidance not in delegate_description(told[0])
            await c.close()
    finally:
        srv.kill()

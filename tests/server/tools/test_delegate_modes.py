"""Issue 36, every delegate mode: `agentId` runs another agent of the same account as the child,
under that agent's own definition (its prompt, its model) and in a session of that agent; `prompt`
gives the child an anonymous persona in place of the agent's prompt; an agent of another account
is not there; prompt and agentId together are refused; `await: false` starts a detached child in
a session of its own while the parent goes on. The tool contract the model is offered lists these
fields (and `script`, the workflow engine's: tests/server/runtime/test_workflows.py).

A server child process on a real socket; the scripted fake model plays every run by the first
message it is handed and records what each was sent."""
from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


def system_of(body: dict) -> str:
    return next((m["content"] for m in body.get("messages", ()) if m.get("role") == "system"), "")


def callables_of(body: dict) -> set[str]:
    """The callable tools the `call` verb's description lists ("- name: ..." lines)."""
    call_tool = next(t["function"] for t in body["tools"] if t["function"]["name"] == "call")
    listed = call_tool["description"].split("Callable tools:\n", 1)[1].split("\n\n", 1)[0]
    return {line[2:].split(":", 1)[0].split(" ", 1)[0] for line in listed.splitlines() if line.startswith("- ")}


PERSONA = "You are a terse auditor who answers in one word."


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def test_a_child_as_another_agent_and_as_a_persona(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            kp, stranger = keypair("modes owner"), keypair("modes stranger")
            c = await V2Client.open(srv.url)
            agent_a, sid = await agent_session(c, kp, "custom", fake.base_url)
            agent_b = (await c.call(kp, {"_": "CreateAgent", "definition": {
                "name": "Bee", "systemPrompt": "You are Bee, the researcher.", "modelProvider": "p",
                "model": "bee-model", "tools": ["navigate"]}}))["agentId"]
            s = await V2Client.open(srv.url)
            agent_c, _ = await agent_session(s, stranger, "custom", fake.base_url)

            def model(request) -> Script:
                body = request.body or {}
                brief = first_user(body)
                if brief == "spread":
                    if not tool_messages(body):
                        return Script(chunks=[], tool_calls=[
                            call("d0", "delegate", {"title": "as bee", "brief": "child bee: look", "agentId": agent_b}),
                            call("d1", "delegate", {"title": "persona", "brief": "child persona: check",
                                                    "prompt": PERSONA}),
                            call("d2", "delegate", {"brief": "child stranger: steal", "agentId": agent_c}),
                            call("d3", "delegate", {"brief": "child both", "agentId": agent_b, "prompt": PERSONA}),
                        ])
                    return Script(chunks=["spread done"])
                return Script(chunks=[brief.split(":")[0] + " done"])

            fake.default = model
            root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("spread")}))["runId"]

            async def ended() -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 90, step=0.1, what="the parent's end")
            tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
            children = {r["title"]: r for r in tree if r["id"] != root}
            assert set(children) == {"as bee", "persona"}, tree

            # the other agent's child: its run, its session, its definition (prompt and model)
            bee = children["as bee"]
            assert bee["agentId"] == agent_b and bee["parentRunId"] == root and bee["status"] == "succeeded"
            bee_session = (await c.call(kp, {"_": "GetSession", "sessionId": bee["sessionId"]}))["session"]
            assert bee_session["agentId"] == agent_b and bee_session["parentSessionId"] == sid
            bee_request = next(r.body for r in fake.requests if first_user(r.body or {}) == "child bee: look")
            assert bee_request["model"] == "bee-model"
            assert "You are Bee, the researcher." in system_of(bee_request)
            assert "You use tools." not in system_of(bee_request)
            # ... and its grants (navigate only), not the caller's (every callable)
            parent_request = next(r.body for r in fake.requests if first_user(r.body or {}) == "spread")
            assert callables_of(parent_request) >= {"search", "navigate"}
            assert callables_of(bee_request) == {"navigate"}

            # the persona: the parent's agent, with the persona as its prompt
            persona = children["persona"]
            assert persona["agentId"] == agent_a
            persona_request = next(r.body for r in fake.requests if first_user(r.body or {}) == "child persona: check")
            assert system_of(persona_request).startswith(PERSONA)
            assert "You use tools." not in system_of(persona_request)
            assert persona_request["model"] == "m"

            # another account's agent is not there; prompt with agentId is refused; nothing ran for them
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answers = {e["toolCallId"]: e for e in events if e["type"] == "tool_result"}
            assert "there is no agent" in answers["d2"]["error"]
            assert "not both" in answers["d3"]["error"]
            assert answers["d0"]["output"]["status"] == "succeeded"
            assert answers["d0"]["output"]["output"] == {"text": "child bee done"}
            assert not any(first_user(r.body or {}).startswith(("child stranger", "child both")) for r in fake.requests)
            assert (await s.call(stranger, {"_": "ListSessions", "agentId": agent_c}))["sessions"][0]["id"] != bee["sessionId"]
            assert len((await s.call(stranger, {"_": "ListSessions", "agentId": agent_c}))["sessions"]) == 1

            # the contract the model was offered: the modes this server runs, not the ones it refuses
            delegate = next(t["function"] for t in parent_request["tools"] if t["function"]["name"] == "delegate")
            props = delegate["parameters"]["properties"]
            assert {"brief", "agentId", "prompt", "output", "tools", "await"} <= set(props)
            assert {"script", "input"} <= set(props)   # script children too (tests/server/runtime/test_workflows.py)
            assert "agentId" in delegate["description"] and "prompt" in delegate["description"]
            json.dumps(delegate)
            for client in (s, c):
                await client.close()
    finally:
        srv.kill()


async def test_a_detached_child_runs_in_its_own_session_and_the_parent_goes_on(tmp_path, storage_flags):
    """`await: false`: the call is answered at once with the child's session and run; the parent's
    turn goes on without parking; the child is in the session list (under the parent's session)
    and in the run tree; nobody is answered when it ends. Fields it cannot honour are refused."""
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("modes detached")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)

            def model(request) -> Script:
                body = request.body or {}
                brief, tools = first_user(body), tool_messages(body)
                if brief == "background":
                    if not tools:
                        return Script(chunks=[], tool_calls=[
                            call("d0", "delegate", {"title": "watcher", "brief": "child detached: watch",
                                                    "await": False}),
                            call("d1", "delegate", {"brief": "child typed", "await": False,
                                                    "output": {"type": "object"}})])
                    return Script(chunks=["parent went on"])
                return Script(chunks=["child detached done"])

            fake.default = model
            root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("background")}))["runId"]

            async def tree_ended() -> list | None:
                runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
                return runs if len(runs) == 2 and all(r["status"] == "succeeded" for r in runs) else None

            tree = await until(tree_ended, 90, step=0.1, what="the parent and its detached child ending")
            child = next(r for r in tree if r["id"] != root)
            assert child["parentRunId"] == root and child["title"] == "watcher" and child["origin"] == "agent"

            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answers = [e for e in events if e["type"] == "tool_result"]
            assert [a["toolCallId"] for a in answers] == ["d0", "d1"]      # the child's end answered nobody
            assert answers[0]["output"]["status"] == "detached"
            assert answers[0]["output"]["sessionId"] == child["sessionId"] and answers[0]["output"]["runId"] == child["id"]
            assert "does not take `output`" in answers[1]["error"]
            assert events[-1]["type"] == "message" and events[-1]["content"] == "parent went on"
            # the parent never parked
            journal = (await c.call(kp, {"_": "GetRunJournal", "runId": root}))["entries"]
            assert all(e["entry"]["kind"] != "wait" for e in journal)

            # the child's own session: in the session list, its brief and its reply
            listed = (await c.call(kp, {"_": "ListSessions", "parentSessionId": sid}))["sessions"]
            assert [s["id"] for s in listed] == [child["sessionId"]]
            child_events = [e["event"] for e in (await c.call(kp, {"_": "GetSession",
                                                                  "sessionId": child["sessionId"]}))["events"]]
            assert child_events[0]["content"] == "child detached: watch"
            assert child_events[-1]["content"] == "child detached done"
            await c.close()
    finally:
        srv.kill()

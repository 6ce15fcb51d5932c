"""Delegation end to end on the scripted fake model (OpenAI wire format): a parent delegates to
three typed children in one reply; one answers, one answers wrongly and then correctly, one hangs
and is canceled. The parent parks while they work and wakes with their results.

Checked as a client sees it: the run tree (ListRuns and the desktop's run-tree hook, i.e.
`useAgentRunTreeSubscription`'s key `runs/<rootRunId>`, its `change` RunInfo values and its
journal `append`s keyed by (runId, seq)), the parent's journal, and the session events of the
parent and of each child."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def first_user(body: dict) -> str:
    for m in body.get("messages", ()):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


def tool_messages(body: dict) -> list[dict]:
    return [m for m in body.get("messages", ()) if m.get("role") == "tool"]


def model(request) -> Script:
    """The scripted model: it looks at the conversation it is handed and plays its part."""
    body = request.body or {}
    brief, tools = first_user(body), tool_messages(body)
    if "fan out" in brief:                     # the parent
        if not tools:
            return Script(chunks=["Splitting the work."], tool_calls=[
                call(f"d{i}", "delegate", {"title": f"part {name}", "brief": f"child {name}: find the answer",
                                           "output": SCHEMA})
                for i, name in enumerate("ABC")])
        results = [json.loads(t["content"]) for t in tools]
        return Script(chunks=["Done: " + ", ".join(f"{r['status']}" for r in results)])
    if brief.startswith("child A"):
        return Script(chunks=[], tool_calls=[call("r1", "return_result", {"answer": "42"})])
    if brief.startswith("child B"):
        if not tools:
            return Script(chunks=[], tool_calls=[call("r1", "return_result", {"answer": 7})])
        return Script(chunks=[], tool_calls=[call("r2", "return_result", {"answer": "seven"})])
    if brief.startswith("child C"):
        return Script(hang=True)
    return Script(chunks=["?"])


class TreeHook:
    """useAgentRunTreeSubscription's reducer: runs by id (newest snapshot wins), the journal
    deduplicated by (runId, seq); plus every status each run was seen in, in order."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.runs: dict[str, dict] = {}
        self.journal: list[dict] = []
        self.moves: dict[str, list[str]] = {}

    def feed(self, event: dict) -> None:
        if event.get("_") == "change" and event["key"].startswith("runs/"):
            assert event["key"] == self.key
            run = event["value"]
            self.runs[run["id"]] = run
            seen = self.moves.setdefault(run["id"], [])
            if not seen or seen[-1] != run["status"]:
                seen.append(run["status"])
        elif event.get("_") == "append" and "event" not in event:
            assert event["key"] == self.key
            entry = {k: event[k] for k in ("runId", "seq", "entry", "createdAt")}
            if not any(e["runId"] == entry["runId"] and e["seq"] == entry["seq"] for e in self.journal):
                self.journal.append(entry)


async def test_a_parent_delegates_to_three_typed_children(server):
    kp = keypair("delegation")
    async with FakeOpenAI() as fake:
        fake.default = model
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        r = await c.call(kp, {"_": "MessageSession", "sessionId": sid,
                              "content": [{"type": "text", "text": "fan out"}]})
        root = r["runId"]
        tree_socket = await V2Client.open(server.url)
        hook = TreeHook("runs/" + root)
        await tree_socket.call(kp, {"_": "Subscribe", "key": hook.key})

        async def follow(pred, timeout=30):
            try:
                async with asyncio.timeout(timeout):
                    while not pred():
                        hook.feed(await tree_socket.event())
            except TimeoutError:
                raise AssertionError(f"the tree never got there: {hook.moves}, {hook.runs}") from None

        # the parent parks on its three children; A and B answer, C hangs
        await follow(lambda: len(hook.runs) == 4 and hook.runs[root]["status"] == "waiting"
                     and sum(r["status"] == "succeeded" for r in hook.runs.values()) == 2
                     and hook.runs[root]["wait"]["pendingChildren"] == 1)
        parked = hook.runs[root]
        assert parked["wait"]["reason"] == "children" and parked["wait"]["pendingChildren"] == 1
        assert server.app.runtime.workers.get(sid) is None     # no worker held while parked
        children = {run["title"]: run for run in hook.runs.values() if run["id"] != root}
        assert set(children) == {"part A", "part B", "part C"}
        for child in children.values():
            assert child["parentRunId"] == root and child["rootRunId"] == root and child["depth"] == 1
            assert child["origin"] == "agent" and child["parentToolCallId"] in ("d0", "d1", "d2")
        hanging = children["part C"]
        assert hanging["status"] == "running"

        # C is canceled: the parent wakes with all three results and answers
        r = await c.call(kp, {"_": "CancelRun", "runId": hanging["id"]})
        assert r["canceled"] is True
        await follow(lambda: hook.runs[root]["status"] == "succeeded")
        assert hook.moves[root] == ["queued", "running", "waiting", "queued", "running", "succeeded"] \
            or hook.moves[root][-4:] == ["waiting", "queued", "running", "succeeded"], hook.moves[root]
        assert hook.moves[children["part A"]["id"]][-2:] == ["running", "succeeded"]
        assert hook.moves[hanging["id"]][-1] == "canceled"

        # ListRuns draws the same tree
        tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
        assert {t["id"]: t["status"] for t in tree} == {i: r["status"] for i, r in hook.runs.items()}

        # the parent's session: the calls, the spawns, the three answers, the final reply
        events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
        kinds = [e["type"] for e in events]
        assert kinds.count("tool_call") == 3 and kinds.count("tool_spawn") == 3 and kinds.count("tool_result") == 3
        answers = {e["toolCallId"]: e for e in events if e["type"] == "tool_result"}
        assert answers["d0"]["output"]["output"] == {"answer": "42"}
        assert answers["d1"]["output"]["output"] == {"answer": "seven"}
        assert answers["d2"]["output"]["status"] == "canceled" and answers["d2"]["output"]["error"]["code"] == "canceled"
        spawns = {e["toolCallId"]: e for e in events if e["type"] == "tool_spawn"}
        assert spawns["d0"]["runId"] == children["part A"]["id"]
        assert events[-1]["type"] == "message" and events[-1]["content"] == "Done: succeeded, succeeded, canceled"

        # child B: the wrong result was handed back, the fixed one accepted
        b_events = [e["event"] for e in (await c.call(kp, {"_": "GetSession",
                                                         "sessionId": children["part B"]["sessionId"]}))["events"]]
        assert b_events[0]["content"] == "child B: find the answer" and b_events[0]["actor"] == "agent"
        results = [e for e in b_events if e["type"] == "tool_result"]
        assert "does not fit the required schema" in results[0]["error"]
        assert results[1]["output"] == {"accepted": True}
        b_journal = (await c.call(kp, {"_": "GetRunJournal", "runId": children["part B"]["id"]}))["entries"]
        assert [(e["entry"]["kind"], e["entry"]["tool"], e["entry"].get("ok")) for e in b_journal] == [
            ("call", "return_result", None), ("result", "return_result", False),
            ("call", "return_result", None), ("result", "return_result", True)]
        # the child saw the schema as return_result's parameters
        b_request = next(r.body for r in fake.requests if first_user(r.body or {}).startswith("child B"))
        offered = {t["function"]["name"]: t["function"]["parameters"] for t in b_request["tools"]}
        assert offered["return_result"] == SCHEMA

        # the parent's journal, via GetRunJournal and via the hook (live)
        journal = (await c.call(kp, {"_": "GetRunJournal", "runId": root}))["entries"]
        kinds = [e["entry"]["kind"] for e in journal]
        assert kinds[:4] == ["call", "call", "call", "wait"] and kinds.count("result") == 3 and kinds[-1] == "fired"
        assert [(e["runId"], e["seq"]) for e in hook.journal if e["runId"] == root] == \
            [(root, e["seq"]) for e in journal]

        # a reload rebuilds the same card from the socket alone
        late = TreeHook(hook.key)
        again = await V2Client.open(server.url)
        await again.call(kp, {"_": "Subscribe", "key": hook.key})
        async with asyncio.timeout(10):
            while len(late.runs) < 4 or len(late.journal) < len(hook.journal):
                late.feed(await again.event())
        assert late.runs == hook.runs
        assert sorted((e["runId"], e["seq"]) for e in late.journal) == sorted((e["runId"], e["seq"]) for e in hook.journal)
        for client in (again, tree_socket, c):
            await client.close()


@pytest.mark.storages("sqlite")
async def test_delegation_limits_are_answered_to_the_model(server):
    """Depth and children per session are the reference's; a call past one is answered with an
    error the model reads, and the turn goes on."""
    kp = keypair("delegation-limits")
    async with FakeOpenAI() as fake:
        def eleven(request):
            body = request.body or {}
            if first_user(body) == "many" and not tool_messages(body):
                return Script(chunks=[], tool_calls=[call(f"m{i}", "delegate", {"brief": f"echo {i}"})
                                                     for i in range(11)])
            if first_user(body) == "many":
                return Script(chunks=["ok"])
            return Script(chunks=[], tool_calls=[]) if False else Script(chunks=["child done"])
        fake.default = eleven
        c = await V2Client.open(server.url)
        _, sid = await agent_session(c, kp, "custom", fake.base_url)
        r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "many"}]})
        root = r["runId"]
        async def root_succeeded():
            return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"
        await until(root_succeeded, 30, step=0.05)
        events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
        refused = [e for e in events if e["type"] == "tool_result" and "at most 10 children" in e.get("error", "")]
        assert [e["toolCallId"] for e in refused] == ["m10"]
        tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
        assert len(tree) == 11 and all(t["status"] == "succeeded" for t in tree)
        await c.close()


@pytest.mark.storages("sqlite")
async def test_a_model_waits_for_a_signal(server):
    """`call` wait parks the run on a signal; SignalRun from another socket wakes it with its
    payload, which the model reads as the call's result; a second signal finds nothing waiting."""
    kp = keypair("model-wait")
    async with FakeOpenAI() as fake:
        def waiter(request):
            tools = tool_messages(request.body or {})
            if not tools:
                return Script(chunks=["Asking."], tool_calls=[call("w1", "call", {"tool": "wait", "input": {
                    "signal": "approved", "label": "approval from the reviewer"}})])
            return Script(chunks=["Got: " + tools[0]["content"]])
        fake.default = waiter
        c = await V2Client.open(server.url)
        _, sid = await agent_session(c, kp, "custom", fake.base_url)
        root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid,
                                  "content": [{"type": "text", "text": "ask"}]}))["runId"]
        async def waiting() -> dict | None:
            run = (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]
            return run if run["status"] == "waiting" else None

        run = await until(waiting, 20, step=0.05, what="the root run waiting")
        assert run["wait"] == {"reason": "event", "answerWith": "approved", "label": "approval from the reviewer"}
        other = await V2Client.open(server.url)
        r = await other.call(kp, {"_": "SignalRun", "runId": root, "signal": "approved", "payload": {"ok": 1}})
        assert r["delivered"] is True
        r = await other.call(kp, {"_": "SignalRun", "runId": root, "signal": "approved", "payload": {"ok": 1}})
        assert r["delivered"] is False
        async def succeeded() -> bool:
            return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

        await until(succeeded, 20, step=0.05, what="the root run succeeded")
        events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
        answer = next(e for e in events if e["type"] == "tool_result" and e["toolCallId"] == "w1")
        assert answer["output"] == {"delivered": True, "source": "signal", "signal": "approved", "payload": {"ok": 1}}
        assert events[-1]["content"].startswith("Got: ") and '"ok": 1' in events[-1]["content"]
        for client in (other, c):
            await client.close()


def test_a_typed_child_taken_up_again_keeps_its_delivered_result():
    """After a crash between its accepted return_result and its ending, a typed child's next
    attempt starts finished with that result (it is not asked again, nor failed for lacking one)."""
    from seed_agents.server.runtime.history import Entry
    from seed_agents.server.tools.delegation_tools import Delegating

    entries = [Entry(1, "e1", "user", "brief"),
               Entry(2, "e2", "tool_call", '{"answer": 7}', run_id="c", call_id="r1", name="return_result"),
               Entry(3, "e3", "tool", "does not fit", run_id="c", call_id="r1", name="return_result", is_error=True),
               Entry(4, "e4", "tool_call", '{"answer": "seven"}', run_id="c", call_id="r2", name="return_result"),
               Entry(5, "e5", "tool", '{"accepted": true}', run_id="c", call_id="r2", name="return_result")]
    state = Delegating(1, 0, SCHEMA)
    state.restore(entries, "c")
    assert state.finished and state.result == {"answer": "seven"}
    fresh = Delegating(1, 0, SCHEMA)
    fresh.restore(entries[:3], "c")
    assert not fresh.finished and fresh.result is None

"""Issue 36, plans on runs: a settled checklist is frozen on the run that made it (RunInfo.plan), and
children spawned while one plan step is in progress carry that step (stepLabel, planStepId), in
GetRun, ListRuns and the `runs/<root>` change events the desktop's run card reads
(run-work.tsx nests children under their step by planStepId).

A server child process on a real socket; the scripted fake model (tests/fakes/openai_server.py)
plays the parent and its children by the conversation it is handed."""
from __future__ import annotations

import asyncio

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import TreeHook, first_user
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


def since_last_user(body: dict) -> tuple[str, int]:
    """(the last message the person wrote, how many tool results came after it); the server's
    own user-role blocks (the live checklist) are not the person's."""
    messages = body.get("messages", ())
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"
                and m.get("content") in ("plan it", "again", "go")), default=-1)
    content = messages[last].get("content") if last >= 0 else ""
    return (content if isinstance(content, str) else ""), sum(m.get("role") == "tool" for m in messages[last + 1:])


STEPS = [{"id": "s1", "label": "research both sides", "status": "running"},
         {"id": "s2", "label": "write it up", "status": "pending"}]


def model(request) -> Script:
    body = request.body or {}
    if first_user(body).startswith("child"):
        return Script(chunks=["child done"])
    said, answered = since_last_user(body)
    if said == "plan it":
        if answered == 0:
            return Script(chunks=[], tool_calls=[call("p1", "plan", {"title": "Compare", "steps": STEPS})])
        if answered == 1:     # two children for the one running step
            return Script(chunks=[], tool_calls=[call(f"d{i}", "delegate", {"title": f"side {i}",
                                                                            "brief": f"child {i}: look"})
                                                 for i in range(2)])
        if answered == 3:
            done = [{**s, "status": "done"} for s in STEPS]
            return Script(chunks=[], tool_calls=[call("p2", "plan", {"title": "Compare", "steps": done})])
        return Script(chunks=["compared"])
    if said == "again":       # a new checklist in a later turn replaces the session's, not the run's
        if answered == 0:
            return Script(chunks=[], tool_calls=[call("p3", "plan", {"steps": [
                {"id": "n1", "label": "something new", "status": "done"}]})])
        return Script(chunks=["again done"])
    return Script(chunks=["?"])


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def run_of(c, kp, run_id: str) -> dict:
    return (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]


async def test_a_settled_plan_stays_on_its_run_and_children_carry_their_step(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = model
            kp = keypair("run plans")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("plan it")}))["runId"]
            tree_socket = await V2Client.open(srv.url)
            hook = TreeHook("runs/" + root)
            await tree_socket.call(kp, {"_": "Subscribe", "key": hook.key})
            try:
                async with asyncio.timeout(60):
                    while not (hook.runs.get(root, {}).get("status") == "succeeded" and "plan" in hook.runs[root]):
                        hook.feed(await tree_socket.event())
            except TimeoutError:
                raise AssertionError(f"the tree never got there: {hook.runs[root]}, {[[(m.get('role'), str(m.get('content'))[:80]) for m in r.body['messages']] for r in fake.requests]}") from None

            # the runs/ events: children under step s1, the root with its frozen plan
            children = [r for r in hook.runs.values() if r["id"] != root]
            assert len(children) == 2
            assert {(r["stepLabel"], r["planStepId"]) for r in children} == {("research both sides", "s1")}
            frozen = hook.runs[root]["plan"]
            assert frozen["ownerRunId"] == root and frozen["title"] == "Compare"
            assert [(s["id"], s["status"]) for s in frozen["steps"]] == [("s1", "done"), ("s2", "done")]
            assert isinstance(frozen["settledAt"], int)
            assert "stepLabel" not in hook.runs[root] and "planStepId" not in hook.runs[root]

            # ListRuns and GetRun say the same
            tree = {r["id"]: r for r in (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]}
            for child in children:
                assert tree[child["id"]]["planStepId"] == "s1" and tree[child["id"]]["stepLabel"] == "research both sides"
                got = await run_of(c, kp, child["id"])
                assert got["planStepId"] == "s1" and "plan" not in got
            assert tree[root]["plan"] == frozen
            assert (await run_of(c, kp, root))["plan"] == frozen

            # a later turn's new checklist replaces the session's live plan; the first run keeps its own
            second = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("again")}))["runId"]

            async def second_done() -> bool:
                return (await run_of(c, kp, second))["status"] == "succeeded"

            await until(second_done, 60, step=0.1, what="the second turn's end")
            session = (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["session"]
            assert [s["id"] for s in session["plan"]["steps"]] == ["n1"]
            assert (await run_of(c, kp, root))["plan"] == frozen
            assert (await run_of(c, kp, second))["plan"]["steps"][0]["id"] == "n1"
            for client in (tree_socket, c):
                await client.close()
    finally:
        srv.kill()


async def test_no_step_is_stamped_when_none_or_several_are_running(tmp_path):
    """Which step a child serves is unknown when two run at once (the reference stamps none)."""
    def two_running(request) -> Script:
        body = request.body or {}
        if first_user(body).startswith("child"):
            return Script(chunks=["child done"])
        said, answered = since_last_user(body)
        if answered == 0:
            return Script(chunks=[], tool_calls=[call("p1", "plan", {"steps": [
                {"id": "a", "label": "one", "status": "running"}, {"id": "b", "label": "two", "status": "running"}]})])
        if answered == 1:
            return Script(chunks=[], tool_calls=[call("d0", "delegate", {"brief": "child: look"})])
        return Script(chunks=["ok"])

    srv = ServerProcess(tmp_path / "srv").start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = two_running
            kp = keypair("run plans two")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("go")}))["runId"]

            async def tree_done() -> list | None:
                runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
                return runs if len(runs) == 2 and all(r["status"] == "succeeded" for r in runs) else None

            runs = await until(tree_done, 60, step=0.1, what="the tree's end")
            child = next(r for r in runs if r["id"] != root)
            assert "planStepId" not in child and "stepLabel" not in child
            assert all("plan" not in r for r in runs)     # an unsettled plan is not frozen on anything
            await c.close()
    finally:
        srv.kill()


async def test_a_plan_an_earlier_run_settled_is_cleared_at_the_next_turn(tmp_path, storage_flags):
    """The reference's #retireSettledSessionPlan: the finished checklist lives on in its run; the
    session's live plan is cleared when the next turn starts, so the new turn's card and the model
    start clean (no `<plan_state>` of the old list)."""
    done = [{"id": "s1", "label": "look it up", "status": "done"}]

    def settle_then_talk(request) -> Script:
        said, answered = since_last_user(request.body or {})
        if said == "plan it" and answered == 0:
            return Script(chunks=[], tool_calls=[call("p1", "plan", {"title": "Look", "steps": done})])
        return Script(chunks=[f"answered {said}"])

    srv = ServerProcess(tmp_path / "srv", extra=storage_flags).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = settle_then_talk
            kp = keypair("run plans retire")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            first = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("plan it")}))["runId"]

            async def ended(run_id: str):
                run = await run_of(c, kp, run_id)
                return run if run["status"] == "succeeded" else None

            frozen = (await until(lambda: ended(first), 60, step=0.1, what="the first turn's end"))["plan"]
            assert [s["status"] for s in frozen["steps"]] == ["done"]
            session = (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["session"]
            assert session["plan"]["steps"] == frozen["steps"]    # still the live plan until a next turn

            seen = len(fake.requests)
            second = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("go")}))["runId"]
            # the session's followers are told: a change of the session without its plan
            async with asyncio.timeout(60):
                while True:
                    e = await c.event()
                    if e.get("_") == "change" and e.get("key") == f"sessions/{sid}" and "plan" not in e["value"]:
                        break
            await until(lambda: ended(second), 60, step=0.1, what="the second turn's end")
            session = (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["session"]
            assert "plan" not in session
            assert (await run_of(c, kp, first))["plan"] == frozen     # the history stays on its run
            assert "plan" not in await run_of(c, kp, second)
            later = [r.body for r in fake.requests[seen:]]
            assert later and all("<plan_state>" not in str(m.get("content")) for b in later for m in b["messages"])
            await c.close()
    finally:
        srv.kill()

"""Issue 32, finding 5: delegation shares one token budget. A child is given a share of what its
parent has left (reserved on the parent until it ends, then charged what its subtree used), so a
three-level tree spends about its root's --max-run-tokens, not a multiple of it, and the root
ends with a clear `budget-exceeded` error when the tree has used it up. Tokens are counted from
our own estimate when the provider's figures are missing or implausible.

A server child process on a real socket; the scripted fake model (tests/fakes/openai_server.py)
in this process plays every run of the tree, by the first message it is handed."""
from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

STEP = {"prompt_tokens": 1500, "completion_tokens": 500, "total_tokens": 2000}   # plausible figures
BUDGET = 100_000


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


def busy() -> Script:
    """A model that keeps working: one tool call per step, 2,000 tokens each."""
    return Script(chunks=[], tool_calls=[call("", "read", {"address": "~/self"})], usage=dict(STEP))


def tree_model(request) -> Script:
    body = request.body or {}
    brief, answered = first_user(body), bool(tool_messages(body))
    if brief == "root":
        if not answered:
            return Script(chunks=[], tool_calls=[call(f"l1-{i}", "delegate", {"brief": f"level 1 #{i}"})
                                                 for i in range(3)], usage=dict(STEP))
        return busy()            # the root keeps going after its children: it must not pass the budget
    if brief.startswith("level 1"):
        if not answered:
            return Script(chunks=[], tool_calls=[call(f"l2-{i}", "delegate", {"brief": f"level 2 #{i}"})
                                                 for i in range(3)], usage=dict(STEP))
        return Script(chunks=["level 1 done"], usage=dict(STEP))
    return busy()                # level 2 works until its share is spent


async def finished(c: V2Client, kp, run_id: str) -> dict:
    async def ended() -> bool:
        runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": run_id}))["runs"]
        return any(r["id"] == run_id and r["status"] in ("succeeded", "failed", "canceled") for r in runs)

    await until(ended, 180, step=0.2, what="the root run's end")
    return next(r for r in (await c.call(kp, {"_": "ListRuns", "rootRunId": run_id}))["runs"] if r["id"] == run_id)


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    """A server child on SQLite, or on PostgreSQL (a schema of its own, leased runs)."""
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def test_a_three_level_tree_spends_about_its_roots_budget(tmp_path, storage_flags):
    srv = ServerProcess(tmp_path / "srv", extra=["--max-run-tokens", str(BUDGET), *storage_flags]).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = tree_model
            kp = keypair("budget tree")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            root_id = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("root")}))["runId"]
            root = await finished(c, kp, root_id)
            tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root_id}))["runs"]
            spent = len(fake.requests) * STEP["total_tokens"]   # every step the fake answered
            print(f"\n{len(tree)} runs, {len(fake.requests)} model steps, {spent} tokens against {BUDGET}")
            # Thirteen runs (1 + 3 + 9); together about the root's budget. (Before, each child
            # started with its parent's whole remainder: some ten times the budget.)
            assert len(tree) == 13 and max(r["depth"] for r in tree) == 2
            assert spent <= BUDGET * 1.1, spent
            # The grandchildren ran out of their shares; the root did not "succeed" past the budget.
            assert all(r["status"] == "failed" and r["error"]["code"] == "budget-exceeded"
                       for r in tree if r["depth"] == 2)
            assert root["status"] == "failed" and root["error"]["code"] == "budget-exceeded", root
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            error = events[-1]
            assert error["type"] == "error" and "token budget ended" in error["message"]
            assert "the runs it delegated" in error["message"] and "--max-run-tokens" in error["message"]
            await c.close()
    finally:
        srv.kill()


async def test_implausible_usage_is_counted_from_our_estimate(tmp_path):
    """A provider that says every step cost nothing, for replies of 16 KB each: the run is
    counted from the bytes (about 4 per token) and ends on tokens, not after 50 steps."""
    srv = ServerProcess(tmp_path / "srv", extra=["--max-run-tokens", "20000"]).start()
    try:
        async with FakeOpenAI() as fake:
            fake.default = Script(chunks=["lorem ipsum " * 1365], tool_calls=[call("", "read", {"address": "~/self"})],
                                  usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
            kp = keypair("zero usage")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            run_id = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("go")}))["runId"]
            run = await finished(c, kp, run_id)
            assert run["status"] == "failed" and run["error"]["code"] == "budget-exceeded", run
            assert "--max-run-tokens" in run["error"]["message"]
            # 16 KB a step is some 4,000 tokens: a handful of steps, far from the 50-step bound.
            assert len(fake.requests) <= 6, len(fake.requests)
            await c.close()
    finally:
        srv.kill()

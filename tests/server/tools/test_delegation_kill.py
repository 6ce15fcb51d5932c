"""SIGKILL of the server while delegated children run, and while their parent is parked: after a
restart every run tree ends complete (or canceled), no delegate call gets a second child, and no
parent waits forever. The server is a child process on a SQLite file (tests/procs.py); the
scripted model runs in the test on loopback. A few rounds by default, 20 behind `slow`."""
from __future__ import annotations

import asyncio
import random

import apsw
import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

CHILDREN = 3
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def model(request) -> Script:
    body = request.body or {}
    brief, tools = first_user(body), tool_messages(body)
    if brief.startswith("fan out"):
        if not tools:
            # one typed child (it answers through return_result), the others plain
            return Script(chunks=[], tool_calls=[call(f"d{i}", "delegate", {"brief": f"child {i}",
                                                                          **({"output": SCHEMA} if i == 0 else {})})
                                                 for i in range(CHILDREN)])
        return Script(chunks=["all done"])
    # a child takes a moment, so the kill can land while it works
    if brief == "child 0":
        return Script(chunks=[], tool_calls=[call("r", "return_result", {"answer": "zero"})],
                      first_delay=random.uniform(0.05, 0.4))
    return Script(chunks=["child ", "answer"], first_delay=random.uniform(0.05, 0.4), chunk_delay=0.1)


def tree_state(db_path: str, root: str) -> dict:
    conn = apsw.Connection(db_path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        runs = conn.execute("SELECT id, status, parent_tool_call_id FROM runs WHERE root_run_id = ?",
                            (root,)).fetchall()
        results = conn.execute(
            "SELECT count(*) FROM session_events e JOIN runs r ON r.session_id = e.session_id"
            " WHERE r.id = ? AND instr(e.body, CAST('tool_result' AS BLOB)) > 0", (root,)).fetchone()[0]
        return {"runs": runs, "results": results}
    finally:
        conn.close()


async def one_round(server: ServerProcess, fake, n: int) -> None:
    """One tree, one SIGKILL while it works, one restart; the server is running again after."""
    kp = keypair(f"kill-{n}")
    c = await V2Client.open(server.url)
    _, sid = await agent_session(c, kp, "custom", fake.base_url)
    root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid,
                              "content": [{"type": "text", "text": "fan out"}]}))["runId"]
    # kill while the children run (some may have answered; the parent is parked by then)
    async def children_running() -> bool:
        tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
        return len(tree) == 1 + CHILDREN and any(t["status"] == "running" for t in tree[1:])

    await until(children_running, 20, what="the children running")
    await asyncio.sleep(random.uniform(0.0, 0.3))   # a random kill point while they run
    await c.close()
    server.kill()
    server.start(timeout=90)   # (a busy machine can take a while to start a process)
    c = await V2Client.open(server.url)
    async def tree_ended() -> list | None:
        tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
        return tree if all(t["status"] in ("succeeded", "failed", "canceled") for t in tree) else None

    tree = await until(tree_ended, 40, step=0.05, what="every run of the tree ended")
    await c.close()
    state = tree_state(str(server.data_dir / "agents.sqlite"), root)
    children = [r for r in state["runs"] if r[2] is not None]
    assert sorted(r[2] for r in children) == [f"d{i}" for i in range(CHILDREN)], state   # none twice
    assert {r[1] for r in state["runs"]} <= {"succeeded", "canceled"}, state
    root_status = next(r[1] for r in state["runs"] if r[0] == root)
    assert root_status == "succeeded", state   # the parent did not wait forever
    assert state["results"] == CHILDREN, state   # each call answered once
    typed = next(r for r in state["runs"] if r[2] == "d0")
    assert typed[1] == "succeeded", state


async def rounds(tmp_path, count: int) -> None:
    async with FakeOpenAI() as fake:
        fake.default = model
        server = ServerProcess(tmp_path / "data").start(timeout=90)
        try:
            for n in range(count):
                await one_round(server, fake, n)
        finally:
            server.kill()


async def test_sigkill_while_children_run_and_the_parent_is_parked(tmp_path):
    await rounds(tmp_path, 1)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_sigkill_twenty_rounds(tmp_path):
    await rounds(tmp_path, 20)

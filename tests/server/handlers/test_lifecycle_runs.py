"""GetRun, ListRuns and CancelRun over real sockets; run changes on runs/<rootRunId>."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.server.store import runs as runs_q

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.handlers.test_lifecycle_sessions import call
from tests.server.runtime.test_runtime_turns import provider_session, send, session_status
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session


async def test_get_and_list_runs(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    agent_id, sid = await setup_session(c, a)
    ids = [(await send(c, a, sid, f"m{i}"))["runId"] for i in range(3)]
    await session_status(c, a, sid, "idle")
    got = await call(c, a, {"_": "GetRun", "runId": ids[0]})
    assert got["_"] == "GetRunResponse" and got["run"]["id"] == ids[0] and got["run"]["status"] == "succeeded"
    by_session = (await call(c, a, {"_": "ListRuns", "sessionId": sid}))["runs"]
    assert [r["id"] for r in by_session] == ids[::-1]   # newest first
    by_agent = (await call(c, a, {"_": "ListRuns", "agentId": agent_id, "limit": 2}))["runs"]
    assert [r["id"] for r in by_agent] == ids[:0:-1]
    tree = (await call(c, a, {"_": "ListRuns", "rootRunId": ids[1]}))["runs"]
    assert [r["id"] for r in tree] == [ids[1]]
    assert (await call(c, a, {"_": "ListRuns", "sessionId": sid, "status": "failed"}))["runs"] == []
    # exactly one selector, a known status
    for bad in ({}, {"sessionId": sid, "agentId": agent_id}, {"rootRunId": ids[0], "sessionId": sid}):
        r = await call(c, a, {"_": "ListRuns", **bad})
        assert (r["_"], r["status"]) == ("Error", 400) and "exactly one" in r["message"], bad
    r = await call(c, a, {"_": "ListRuns", "sessionId": sid, "status": "done"})
    assert (r["_"], r["status"]) == ("Error", 400) and "ListRuns.status" in r["message"]
    r = await call(c, a, {"_": "GetRun", "runId": "nope"})
    assert (r["_"], r["status"]) == ("Error", 404)
    c2 = await V2Client.open(server.url)
    for action in ({"_": "GetRun", "runId": ids[0]}, {"_": "ListRuns", "sessionId": sid},
                   {"_": "ListRuns", "agentId": agent_id}, {"_": "ListRuns", "rootRunId": ids[0]},
                   {"_": "CancelRun", "runId": ids[0]}):
        r = await call(c2, b, action)
        assert (r["_"], r["status"]) == ("Error", 404), action
    await c.close(); await c2.close()


# SQLite only: the test writes child run rows itself (no action makes them yet), and a `running`
# row without a lease is what PostgreSQL's lease check refuses, as it should.
@pytest.mark.storages("sqlite")
async def test_cancel_a_run_tree(server):
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30)) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await provider_session(c, a, fake)
        root_id = (await send(c, a, sid, "slow"))["runId"]
        await fake.wait_for_requests(1)
        # The turn's start ('running') commits without the turn waiting for it: wait (bounded)
        # for that commit, so the subscription's first value is read after it.
        async def running() -> bool:
            return (await call(c, a, {"_": "GetRun", "runId": root_id}))["run"]["status"] == "running"

        await until(running, 10, step=0.01)
        watch = await V2Client.open(server.url)
        await call(watch, a, {"_": "Subscribe", "key": f"runs/{root_id}"})
        assert (await watch.event())["value"]["status"] == "running"
        now = server.app.now_ms()

        def spawn(conn):   # children as an agent would spawn them (no action makes them yet)
            root = runs_q.get_run(conn, root_id)
            child = runs_q.create_run(conn, "child", a.account_id, agent_id, None, None, now,
                                      parent=root, origin="agent", title="child")
            grand = runs_q.create_run(conn, "grand", a.account_id, agent_id, None, None, now + 1,
                                      parent=child, origin="agent")
            done = runs_q.create_run(conn, "done", a.account_id, agent_id, None, None, now + 2,
                                     parent=root, origin="agent")
            runs_q.set_run_status(conn, "done", "running", now + 3)
            runs_q.set_run_status(conn, "done", "succeeded", now + 4)
            return child, grand, done

        await server.app.db.write(spawn)
        tree = (await call(c, a, {"_": "ListRuns", "rootRunId": root_id}))["runs"]
        assert [r["id"] for r in tree] == [root_id, "child", "grand", "done"]   # oldest first
        assert tree[2]["depth"] == 2 and tree[2]["parentRunId"] == "child" and tree[2]["rootRunId"] == root_id
        # how many runs each spawned, as the desktop reads it to show a run as a record of its own
        assert [r.get("childRunCount") for r in tree] == [2, 1, None, None]
        assert (await call(c, a, {"_": "GetRun", "runId": root_id}))["run"]["childRunCount"] == 2
        assert "childRunCount" not in (await call(c, a, {"_": "GetRun", "runId": "done"}))["run"]
        # canceling a subtree leaves the root running
        r = await call(c, a, {"_": "CancelRun", "runId": "child"})
        assert r == {"_": "CancelRunResponse", "runId": "child", "canceled": True}
        statuses = {r["id"]: r["status"] for r in (await call(c, a, {"_": "ListRuns", "rootRunId": root_id}))["runs"]}
        assert statuses == {root_id: "running", "child": "canceled", "grand": "canceled", "done": "succeeded"}
        r = await call(c, a, {"_": "CancelRun", "runId": "child"})
        assert r == {"_": "CancelRunResponse", "runId": "child", "canceled": False}
        # the root: the live turn is stopped in the runtime
        r = await call(c, a, {"_": "CancelRun", "runId": root_id})
        assert r == {"_": "CancelRunResponse", "runId": root_id, "canceled": True}
        await fake.wait_for_disconnect()
        seen = {}
        async with asyncio.timeout(10):
            while seen.get(root_id) != "canceled":
                e = await watch.event()
                assert e["key"] == f"runs/{root_id}"   # every run of the tree goes to the root's key
                seen[e["value"]["id"]] = e["value"]["status"]
        assert seen["child"] == "canceled" and seen["grand"] == "canceled"
        await session_status(c, a, sid, "idle")
        # The stopped turn had streamed nothing yet: the log says so, as the reference's does.
        async def two_events():
            got = await call(c, a, {"_": "GetSession", "sessionId": sid})
            return got if len(got["events"]) == 2 else None
        got = await until(two_events, 10)
        assert [(e["event"]["role"], e["event"]["content"]) for e in got["events"]][1:] == [
            ("assistant", "Stopped.")]
        assert got["events"][1]["event"]["meta"]["runId"] == root_id
        root = (await call(c, a, {"_": "GetRun", "runId": root_id}))["run"]
        assert root["status"] == "canceled" and "finishedAt" in root and "error" not in root
        r = await call(c, a, {"_": "CancelRun", "runId": root_id})
        assert r["canceled"] is False
        r = await call(c, a, {"_": "CancelRun"})
        assert (r["_"], r["status"]) == ("Error", 400) and "CancelRun.runId" in r["message"]
        # the session works again
        fake.default = Script(chunks=["fine"])
        await send(c, a, sid, "again")
        async def four_events():
            got = await call(c, a, {"_": "GetSession", "sessionId": sid})
            return got if len(got["events"]) == 4 else None
        got = await until(four_events, 10)
        assert got["events"][-1]["event"]["content"] == "fine"
        await c.close(); await watch.close()

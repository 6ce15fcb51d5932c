"""Parked runs on one PostgreSQL store shared by two servers: a SignalRun sent to the other server
wakes the run (once, however many servers are signalled at once), and the clock of a server that
did not park the run wakes it after the one that did has stopped (it learns the wake time from
the parker's notice, or, if that was lost with the parker, at its next look at the queue)."""
from __future__ import annotations

import asyncio

from seed_agents.server.store import agents as agents_q

from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.cluster.test_cluster_runs import servers
from tests.server.runtime.test_parked_runs import park_on_signal, running_turn, wait_status
from tests.wsraw import V2Client, keypair, setup_session


async def test_a_signal_to_another_server_wakes_the_run_once(tmp_path, postgres_url):
    kp = keypair("cluster-signal")
    async with servers(tmp_path, postgres_url, 2) as (s0, s1):
        c0, c1 = await V2Client.open(s0.url), await V2Client.open(s1.url)
        agent_id, sid = await setup_session(c0, kp)
        agent = s0.app.db.read(agents_q.get_agent, agent_id)
        run = await running_turn(s0.app, sid, agent_id, agent["account"])
        await park_on_signal(s0.app, run, agent)
        watcher = await V2Client.open(s1.url)   # the tree, followed on the other server
        await watcher.call(kp, {"_": "Subscribe", "key": "runs/" + run["id"]})
        first = await watcher.event()
        assert first["value"]["status"] == "waiting"
        answers = await asyncio.gather(*(c.call(kp, {"_": "SignalRun", "runId": run["id"], "signal": "approved"})
                                         for c in (c1, c0, c1)))
        assert sorted(a["delivered"] for a in answers) == [False, False, True], answers
        done = await wait_status(c1, kp, run["id"], "succeeded")
        assert done["attempt"] == 2
        journal = (await c1.call(kp, {"_": "GetRunJournal", "runId": run["id"]}))["entries"]
        assert [e["entry"]["kind"] for e in journal] == ["wait", "event"]
        seen = []
        async with asyncio.timeout(10):
            while "succeeded" not in seen:
                e = await watcher.event()
                if e["_"] == "change":
                    seen.append(e["value"]["status"])
                elif e["_"] == "append":
                    seen.append(("journal", e["seq"]))
        assert ("journal", 2) in seen and seen.index(("journal", 2)) < seen.index("succeeded")
        events = (await c0.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]
        assert sum(e["event"].get("role") == "assistant" for e in events) == 1
        for c in (watcher, c0, c1):
            await c.close()


async def test_the_other_servers_clock_wakes_a_run_parked_by_a_stopped_server(tmp_path, postgres_url):
    kp = keypair("cluster-clock")
    async with servers(tmp_path, postgres_url, 2) as (s0, s1):
        c1 = await V2Client.open(s1.url)
        agent_id, sid = await setup_session(c1, kp)
        agent = s0.app.db.read(agents_q.get_agent, agent_id)
        run = await running_turn(s0.app, sid, agent_id, agent["account"])
        await park_on_signal(s0.app, run, agent, timeout_ms=1500)
        await s0.stop()   # the parker is gone before the wait ends
        done = await wait_status(c1, kp, run["id"], "succeeded", timeout=20)
        journal = (await c1.call(kp, {"_": "GetRunJournal", "runId": run["id"]}))["entries"]
        assert [e["entry"].get("timedOut") for e in journal] == [None, True]
        assert done["attempt"] == 2
        await c1.close()

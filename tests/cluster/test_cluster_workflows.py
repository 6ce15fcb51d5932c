"""A workflow on two servers sharing one PostgreSQL store: the script sleeps long enough to park,
the server it ran on stops, the other server's clock wakes it and it runs on there; then it waits
for a signal, and SignalRun sent to both servers at once wakes it exactly once; its journal has
each effect once."""
from __future__ import annotations

import asyncio

from tests.cluster.test_cluster_runs import pg_config
from tests.fakes.openai_server import FakeOpenAI
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.server.runtime.test_workflows import journal_of, start_script, tree_of
from tests.server.runtime.test_tool_loop import agent_session
from tests.waiting import until
from tests.wsraw import V2Client, keypair

SCRIPT = """
export default async function (input, ctx) {
  await ctx.log('info', 'before');
  await ctx.sleep(1500);
  const got = await ctx.waitForEvent({signal: 'go'});
  await ctx.log('info', 'after');
  return got.payload;
}
"""


async def test_a_workflow_parked_by_a_stopped_server_runs_on_and_is_woken_once(tmp_path, postgres_url):
    from seed_agents.server.main import start_server

    configs = [pg_config(tmp_path, postgres_url, f"s{i}") for i in range(2)]
    for cfg in configs:
        cfg.workflow_park_after_ms = 500
    servers = [await start_server(cfg) for cfg in configs]
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("cluster workflow")
            c0, c1 = await V2Client.open(servers[0].url), await V2Client.open(servers[1].url)
            _, sid = await agent_session(c0, kp, "custom", fake.base_url)
            root = await start_script(c0, kp, sid, fake, SCRIPT, None)

            async def parked(reason: str):  # noqa: ANN202
                runs = [r for r in await tree_of(c1, kp, root) if r["kind"] == "workflow"]
                if runs and runs[0]["status"] == "waiting" and runs[0]["wait"]["reason"] == reason:
                    return runs[0]
                return None

            child = await until(lambda: parked("timer"), 60, step=0.05, what="the script parked on its sleep")
            await servers[0].stop()   # whichever ran it, the other one goes on
            await until(lambda: parked("event"), 30, step=0.05, what="the other server woke it")
            answers = await asyncio.gather(*(c1.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "go",
                                                          "payload": {"n": n}}) for n in range(3)))
            assert sorted(a["delivered"] for a in answers) == [False, False, True], answers

            async def ended() -> bool:
                return (await c1.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 60, step=0.1, what="the parent's end on the other server")
            journal = [e for e in await journal_of(c1, kp, child["id"]) if "callSeq" in e]
            kinds = [e["kind"] for e in journal]
            assert {k: kinds.count(k) for k in ("timer", "fired", "wait", "event")} == \
                {"timer": 1, "fired": 1, "wait": 1, "event": 1}, kinds
            assert [e["message"] for e in journal if e["kind"] == "log"] == ["before", "after"]
            assert next(e for e in journal if e["kind"] == "event")["delivery"]["signal"] == "go"
            for c in (c0, c1):
                await c.close()
    finally:
        for server in servers:
            await server.stop()


PROGRESS_SCRIPT = """
export default async function (input, ctx) {
  await ctx.waitForEvent({signal: 'go'});
  ctx.progress({fraction: 0.5, label: 'half way'});
  await ctx.waitForEvent({signal: 'done'});
  return 'ok';
}
"""


async def test_a_workflows_progress_reaches_subscribers_on_both_servers(tmp_path, postgres_url):
    """Progress is live only, never stored, yet a desktop connected to the other server of the
    cluster sees the run card move too: the partial travels in the cluster's notice."""
    from seed_agents.server.main import start_server

    servers = [await start_server(pg_config(tmp_path, postgres_url, f"s{i}")) for i in range(2)]
    try:
        async with FakeOpenAI() as fake:
            kp = keypair("cluster progress")
            c0, c1 = await V2Client.open(servers[0].url), await V2Client.open(servers[1].url)
            _, sid = await agent_session(c0, kp, "custom", fake.base_url)
            root = await start_script(c0, kp, sid, fake, PROGRESS_SCRIPT, None)

            async def waiting():  # noqa: ANN202
                runs = [r for r in await tree_of(c1, kp, root) if r["kind"] == "workflow"]
                return runs[0] if runs and runs[0]["status"] == "waiting" else None

            child = await until(waiting, 60, step=0.05, what="the script waiting for its signal")
            for c in (c0, c1):
                await c.call(kp, {"_": "Subscribe", "key": f"runs/{root}"})
            assert (await c1.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "go"}))["delivered"]
            for c in (c0, c1):
                seen = await c.event_where(lambda e: e.get("_") == "appendPartial" and e.get("key") == f"runs/{root}",
                                           timeout=30)
                assert seen["runId"] == child["id"]
                assert seen["patch"]["progress"] == {"fraction": 0.5, "label": "half way"}
            await until(waiting, 60, step=0.05, what="the script waiting for its second signal")
            assert (await c0.call(kp, {"_": "SignalRun", "runId": child["id"], "signal": "done"}))["delivered"]
            for c in (c0, c1):
                await c.close()
    finally:
        for server in servers:
            await server.stop()

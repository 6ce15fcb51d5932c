"""Hostile workflows (issue 34, "Bad input and faults"): a script that loops without awaiting,
spins on promise jobs, allocates without end, recurses without end, or journals without end is
stopped by its cap, with a clear error on its run, within a bound; a second, honest client's
GetSession latency is measured meanwhile (printed; the bounds are loose, for a shared 2-core
machine). And a SIGKILL while a side-effecting ctx.call runs: after the restart the call is
answered `interrupted` and never run again.

A server child process on a real socket, SQLite and PostgreSQL, a scripted fake model that
delegates each script."""
from __future__ import annotations

import asyncio
import time

import pytest

from seed_agents.server.config import Config

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.web_server import FakeWeb
from tests.hostile_measure import percentile
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.repo.test_docs_limits import documented_default
from tests.server.runtime.test_tool_loop import agent_session
from tests.server.runtime.test_workflows import journal_of, start_script, tree_of
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

FUEL_MS, MEMORY = 300, 16 << 20

LOOP = "export default async function (input, ctx) { await ctx.log('info', 'going'); while (true) {} }"
SPIN = "export default async function (input, ctx) { for (let i = 0; ; i++) { await null; } }"
HOARD = """export default async function (input, ctx) {
  const keep = [];
  for (let i = 0; ; i++) keep.push(new Array(100000).fill(i));
}"""
DEEP = "function down(n) { return down(n + 1) + 1; }\nexport default async function (input, ctx) { return down(0); }"
CHATTER = """export default async function (input, ctx) {
  for (let i = 0; ; i++) {
    await ctx.parallel(Array.from({length: 400}, (_, j) => () => ctx.log('info', 'line ' + (i * 400 + j))));
  }
}"""


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def run_status(c, kp, run_id: str, status: str) -> bool:  # noqa: ANN001
    return (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]["status"] == status


async def ends_failed(c, kp, agent_id, fake, script: str, honest) -> tuple[dict, list[float], float]:  # noqa: ANN001
    """Delegate `script` in a new session of the agent; (the script child's ended run, the honest
    client's latencies, seconds from its start to its end)."""
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    honest_c, hkp, hsid = honest
    latencies: list[float] = []
    stop = asyncio.Event()

    async def measure() -> None:
        n = 0
        while not stop.is_set() and n < 10_000:
            t = time.perf_counter()
            r = await honest_c.call(hkp, {"_": "GetSession", "sessionId": hsid, "n": n}, timeout=10)
            latencies.append(time.perf_counter() - t)
            assert r["_"] == "GetSessionResponse", r
            n += 1
            await asyncio.sleep(0.02)

    task = asyncio.create_task(measure())
    try:
        root = await start_script(c, kp, sid, fake, script, None)

        async def ended() -> dict | None:
            runs = [r for r in await tree_of(c, kp, root) if r["kind"] == "workflow"]
            return runs[0] if runs and runs[0]["status"] in ("succeeded", "failed", "canceled") else None

        run = await until(ended, 120, step=0.1, what="the script child's end")
    finally:
        stop.set()
        await task
    took = (run["finishedAt"] - run["startedAt"]) / 1000
    print(f"\n{script[:40]!r}: {run.get('error')} after {took:.2f} s; honest GetSession x{len(latencies)} "
          f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")
    assert latencies and percentile(latencies, 0.5) < 0.5 and max(latencies) < 5.0, latencies
    return run, latencies, took


async def test_hostile_scripts_end_at_their_caps_and_the_server_keeps_serving(tmp_path, storage_flags):
    extra = [*storage_flags, "--workflow-fuel-ms", str(FUEL_MS), "--workflow-memory-bytes", str(MEMORY)]
    srv = ServerProcess(tmp_path / "srv", extra=extra).start()
    try:
        async with FakeOpenAI() as fake:
            honest_kp = keypair("workflow honest")
            honest = await V2Client.open(srv.url)
            _, honest_sid = await setup_session(honest, honest_kp)
            kp = keypair("workflow hostile")
            c = await V2Client.open(srv.url)
            agent_id, _ = await agent_session(c, kp, "custom", fake.base_url)
            who = (honest, honest_kp, honest_sid)

            run, _, took = await ends_failed(c, kp, agent_id, fake, LOOP, who)
            assert run["status"] == "failed" and run["error"]["code"] == "fuel-exhausted", run
            assert f"more than {FUEL_MS} ms" in run["error"]["message"] and took < 20
            assert [e["kind"] for e in await journal_of(c, kp, run["id"]) if "callSeq" in e] == ["log"]

            run, _, took = await ends_failed(c, kp, agent_id, fake, SPIN, who)
            assert run["status"] == "failed" and run["error"]["code"] == "fuel-exhausted", run
            assert "promise jobs" in run["error"]["message"] and took < 20

            run, _, took = await ends_failed(c, kp, agent_id, fake, HOARD, who)
            assert run["status"] == "failed" and run["error"]["code"] == "memory-cap", run
            assert "16 MiB" in run["error"]["message"] and took < 20

            run, _, took = await ends_failed(c, kp, agent_id, fake, DEEP, who)
            assert run["status"] == "failed" and run["error"]["code"] == "stack-overflow", run
            assert took < 20

            run, _, took = await ends_failed(c, kp, agent_id, fake, CHATTER, who)
            assert run["status"] == "failed" and run["error"]["code"] == "journal-cap", run
            assert "5000 entries" in run["error"]["message"] and took < 60
            journal = (await c.call(kp, {"_": "GetRunJournal", "runId": run["id"], "limit": 1000}))
            assert journal["entries"][0]["entry"]["kind"] == "log"
            # the cap held: at most 5,000 entries, written whole batches at a time (none half-written)
            last = (await c.call(kp, {"_": "GetRunJournal", "runId": run["id"], "afterSeq": 4999}))["entries"]
            assert [e["seq"] for e in last] in ([], [5000])

            # the parent's turn went on: the failure is an answer, not a crash
            parent = (await c.call(kp, {"_": "GetRun", "runId": run["parentRunId"]}))["run"]
            await until(lambda: run_status(c, kp, parent["id"], "succeeded"), 60, step=0.1, what="the parent's end")
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession",
                                                             "sessionId": parent["sessionId"]}))["events"]]
            answer = next(e["output"] for e in events if e["type"] == "tool_result" and e.get("name") == "delegate")
            assert answer["status"] == "failed" and answer["error"]["code"] == "journal-cap", answer
            for client in (c, honest):
                await client.close()
    finally:
        srv.kill()


SIDE_EFFECT = """export default async function (input, ctx) {
  let first;
  try {
    first = await ctx.call('write', {address: '~/memory/dl.txt', content: '', options: {fromUrl: input.url}});
  } catch (e) { first = {code: e.code, callSeq: e.callSeq}; }
  const after = await ctx.call('read', {address: input.page});
  return {first, after: typeof after};
}"""


def test_the_production_run_lease_is_the_documented_one():
    """The SIGKILL test below runs on a 3 s lease; a server not told otherwise holds a run 15 s
    (docs/operations.md) before another may take it."""
    assert Config().run_lease == documented_default("--run-lease") == 15


async def test_a_sigkill_during_a_side_effect_never_runs_it_twice(tmp_path, storage_flags):
    # On PostgreSQL the restarted server takes the killed one's runs when their lease runs out:
    # a short lease (3 s, as the cluster tests) rather than the default 15 s.
    lease = ["--run-lease", "3", "--run-poll-interval", "0.2"] if storage_flags else []
    extra = [*storage_flags, *lease, "--web-networks", "loopback"]
    srv = ServerProcess(tmp_path / "srv", extra=extra).start()
    try:
        async with FakeOpenAI() as fake, FakeWeb() as web:
            web.hang("/stuck")
            kp = keypair("workflow killed")
            c = await V2Client.open(srv.url)
            agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = await start_script(c, kp, sid, fake, SIDE_EFFECT, {"url": web.url("/stuck"),
                                                                       "page": web.url("/page.html")})
            await until(lambda: ("GET", "/stuck") in web.requests, 60, step=0.05, what="the download under way")
            child = next(r for r in await tree_of(c, kp, root) if r["kind"] == "workflow")
            srv.kill()   # while the write's download runs
            srv.start()
            c = await V2Client.open(srv.url)

            async def ended() -> bool:
                return (await c.call(kp, {"_": "GetRun", "runId": root}))["run"]["status"] == "succeeded"

            await until(ended, 90, step=0.1, what="the parent's end after the restart")
            run = (await c.call(kp, {"_": "GetRun", "runId": child["id"]}))["run"]
            assert run["status"] == "succeeded", run
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            answer = next(e for e in events if e["type"] == "tool_result" and e["toolCallId"] == "d1")["output"]
            assert answer["output"] == {"first": {"code": "interrupted", "callSeq": 1}, "after": "object"}, answer
            assert web.requests.count(("GET", "/stuck")) == 1            # the side effect ran once
            assert web.requests.count(("GET", "/page.html")) == 1        # what came after ran once too
            journal = await journal_of(c, kp, child["id"])
            results = [e for e in journal if e["kind"] == "result" and e.get("callSeq") == 1]
            assert [r["error"]["code"] for r in results] == ["interrupted"]
            listing = await c.call(kp, {"_": "ListAgentMemoryFiles", "agentId": agent_id})
            assert "dl.txt" not in str(listing)
    finally:
        srv.kill()

"""Issue 32, finding 12 and "Fair sharing": an account's runs in flight, its trigger firings and
the runs of one delegation tree are bounded per account (agents cost nothing, so bounds per agent
alone bound nothing), each refusal is a sentence naming its flag, and the server keeps serving
another account meanwhile. Each test runs a server as a child process on a real socket, with the
fake model (tests/fakes/openai_server.py) in this process."""
from __future__ import annotations

import asyncio
import math
import time

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.hostile_measure import percentile
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.tools.test_delegation import first_user, tool_messages
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.triggers_helpers import create_trigger, get_trigger, make_agent
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

UNLIMITED_RATE = ["--rate-limit", "100000", "--rate-burst", "100000"]


def text(s: str) -> list[dict]:
    return [{"type": "text", "text": s}]


async def honest_latencies(c: V2Client, kp, session_id: str, stop: asyncio.Event, limit: float) -> list[float]:
    """An honest client's GetSession round trips, at its own pace, until `stop` (or `limit` s)."""
    out: list[float] = []
    deadline = time.perf_counter() + limit
    while not stop.is_set() and time.perf_counter() < deadline and len(out) < 2000:
        t = time.perf_counter()
        r = await c.call(kp, {"_": "GetSession", "sessionId": session_id}, timeout=10)
        out.append(time.perf_counter() - t)
        assert r["_"] == "GetSessionResponse", r
        await asyncio.sleep(0.02)
    return out


async def agents_with_sessions(c: V2Client, kp, base_url: str, agents: int, sessions: int) -> list[str]:
    """`agents` agents on the fake model (the first made by agent_session), `sessions` sessions each."""
    first_agent, first = await agent_session(c, kp, "custom", base_url)
    agent_ids = [first_agent]
    for a in range(1, agents):
        r = await c.call(kp, {"_": "CreateAgent", "definition": {
            "name": f"Agent {a}", "systemPrompt": "x", "modelProvider": "p", "model": "m"}})
        agent_ids.append(r["agentId"])
    out = [first]
    for agent_id in agent_ids:
        for _ in range(sessions - (agent_id == first_agent)):
            out.append((await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"])
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_flags(request) -> list[str]:
    """A server child on SQLite, or on PostgreSQL (a schema of its own, leased runs)."""
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def run_flood(tmp_path, seconds: float, flags: tuple[str, ...] = ()) -> tuple[dict, list[float], list[float]]:
    """An account with 4 agents keeps asking for turns its (hanging) model never finishes, while
    another account's echo turn and GetSession calls are measured. Returns what the flood was
    answered, and the honest client's latencies before and during it."""
    srv = ServerProcess(tmp_path / "srv", extra=["--max-runs-in-flight", "6", *UNLIMITED_RATE, *flags]).start()
    try:
        async with FakeOpenAI(Script(hang=True)) as fake:
            attacker, honest = keypair("flooder"), keypair("honest")
            a = await V2Client.open(srv.url)
            h = await V2Client.open(srv.url)
            sessions = await agents_with_sessions(a, attacker, fake.base_url, 4, 4)   # 16 sessions
            _, hsid = await setup_session(h, honest)
            await h.call(honest, {"_": "Subscribe", "key": f"sessions/{hsid}"})
            before = await honest_latencies(h, honest, hsid, asyncio.Event(), 1.0)
            answers: dict = {}
            stop = asyncio.Event()

            async def flood() -> None:
                deadline = time.perf_counter() + seconds
                n = 0
                while time.perf_counter() < deadline and n < 5000:
                    r = await a.call(attacker, {"_": "MessageSession", "sessionId": sessions[n % len(sessions)],
                                                "content": text(f"work {n}")}, timeout=10)
                    key = r["_"] if r["_"] != "Error" else f"Error {r['status']}"
                    answers[key] = answers.get(key, 0) + 1
                    answers.setdefault("messages", set()).add(r.get("message", ""))
                    n += 1
                stop.set()

            measuring = asyncio.create_task(honest_latencies(h, honest, hsid, stop, seconds + 10))
            await flood()
            during = await measuring
            # The honest account still gets its turns: its run is queued and answered.
            r = await h.call(honest, {"_": "MessageSession", "sessionId": hsid, "content": text("still there?")})
            assert r["_"] == "MessageSessionResponse", r
            await h.event_where(lambda e: e.get("_") == "append"
                                and e["event"]["event"].get("content") == "echo: still there?", timeout=30)
            # The flooder's runs in flight stayed at the bound (queued + running, all its agents).
            runs = []
            for sid in sessions:
                runs += (await a.call(attacker, {"_": "ListRuns", "sessionId": sid}))["runs"]
            answers["live"] = sum(r["status"] in ("queued", "running") for r in runs)
            await a.close()
            await h.close()
            return answers, before, during
    finally:
        srv.kill()


def check_flood(answers: dict, before: list[float], during: list[float], p99_bound: float) -> None:
    print(f"\nflood answers {dict((k, v) for k, v in answers.items() if k != 'messages')}; honest GetSession "
          f"before p50 {percentile(before, 0.5) * 1000:.1f} ms p99 {percentile(before, 0.99) * 1000:.1f} ms; "
          f"during x{len(during)} p50 {percentile(during, 0.5) * 1000:.1f} ms "
          f"p99 {percentile(during, 0.99) * 1000:.1f} ms")
    assert answers["MessageSessionResponse"] == 6, answers
    assert answers["Error 429"] >= 6, answers
    refusals = [m for m in answers["messages"] if m]
    assert refusals and all("--max-runs-in-flight 6" in m and "runs queued or running" in m for m in refusals)
    assert answers["live"] == 6
    # Relative to the same client before the flood (generous: a shared, loaded machine).
    assert percentile(during, 0.5) < max(10 * percentile(before, 0.5), 0.1)
    assert percentile(during, 0.99) < p99_bound


async def test_runs_in_flight_are_bounded_per_account_and_others_are_served(tmp_path, storage_flags):
    answers, before, during = await run_flood(tmp_path, 3, tuple(storage_flags))
    check_flood(answers, before, during, 1.0)


@pytest.mark.slow
async def test_runs_in_flight_flood_honest_p99_under_50ms(tmp_path):
    """`make stress`: the honest client's p99 during a 30-second flood, on a quiet machine."""
    answers, before, during = await run_flood(tmp_path, 30)
    check_flood(answers, before, during, 0.05)


async def test_trigger_firings_are_bounded_per_account(tmp_path):
    """Three agents with a webhook trigger each, nine deliveries: past the account's hourly bound
    a firing is recorded as skipped with the reason; nothing starts."""
    srv = ServerProcess(tmp_path / "srv", extra=["--account-trigger-firings-per-hour", "4"]).start()
    try:
        kp = keypair("triggers")
        c = await V2Client.open(srv.url)
        hooks = []
        for i in range(3):
            agent_id = await make_agent(c, kp)
            trigger = await create_trigger(c, kp, agent_id, {"type": "webhook"}, name=f"hook{i}")
            hook = (await get_trigger(c, kp, trigger["id"]))["webhook"]
            hooks.append((trigger["id"], f"http://127.0.0.1:{srv.port}{hook['path']}", hook["secret"]))
        statuses = []
        async with httpx.AsyncClient() as http:
            for n in range(3):
                for _, url, secret in hooks:
                    r = await http.post(url, json={"n": n}, headers={"Authorization": f"Bearer {secret}"})
                    assert r.status_code == 202, r.text
                    statuses.append(r.json()["firingStatus"])
        assert statuses.count("created") == 4 and statuses.count("skipped") == 5, statuses
        skipped = []
        for trigger_id, _, _ in hooks:
            skipped += [f for f in (await get_trigger(c, kp, trigger_id))["firings"] if f["status"] == "skipped"]
        assert len(skipped) == 5
        assert all("--account-trigger-firings-per-hour" in f["error"] and "4 trigger firings per hour" in f["error"]
                   for f in skipped), skipped
        assert all("sessionId" not in f for f in skipped)
        await c.close()
    finally:
        srv.kill()


async def test_a_delegation_tree_is_bounded_in_runs(tmp_path):
    """--max-tree-runs 4: a parent asking for six children gets three (the tree is then four
    runs); the other calls are answered with the limit, which the model reads, and it answers."""
    srv = ServerProcess(tmp_path / "srv", extra=["--max-tree-runs", "4", *UNLIMITED_RATE]).start()
    try:
        async with FakeOpenAI() as fake:
            def model(request):
                body = request.body or {}
                if first_user(body) == "fan out":
                    if not tool_messages(body):
                        return Script(chunks=[], tool_calls=[call(f"d{i}", "delegate", {"brief": f"part {i}"})
                                                             for i in range(6)])
                    return Script(chunks=["all done"])
                return Script(chunks=["child done"])
            fake.default = model
            kp = keypair("tree")
            c = await V2Client.open(srv.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            root = (await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text("fan out")}))["runId"]

            async def finished() -> bool:
                runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
                return any(r["id"] == root and r["status"] == "succeeded" for r in runs)

            await until(finished, 60)
            runs = (await c.call(kp, {"_": "ListRuns", "rootRunId": root}))["runs"]
            assert len(runs) == 4 and sum(r.get("parentRunId") == root for r in runs) == 3
            events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
            refused = [e for e in events if e["type"] == "tool_result" and e.get("error")]
            assert len(refused) == 3
            assert all("--max-tree-runs 4" in e["error"] for e in refused), refused
            assert events[-1]["content"] == "all done"
            await c.close()
    finally:
        srv.kill()


async def test_twenty_agents_schedules_are_bounded_per_account_and_others_are_served(tmp_path):
    """The finding's own case: one account, 20 agents, each with a trigger every minute, on a
    trigger clock 600 times the wall clock (a trigger hour is 6 s). Within half a trigger hour
    the account starts --account-trigger-firings-per-hour runs, not 20 x 30, and another
    account's GetSession is measured meanwhile."""
    speed, bound = 600, 10
    srv = ServerProcess(tmp_path / "srv", extra=[
        "--trigger-clock-speed", str(speed), "--trigger-clock-epoch-ms", str(int(time.time() * 1000)),
        "--account-trigger-firings-per-hour", str(bound), *UNLIMITED_RATE]).start()
    try:
        kp, honest = keypair("twenty agents"), keypair("honest")
        c = await V2Client.open(srv.url)
        h = await V2Client.open(srv.url)
        _, hsid = await setup_session(h, honest)
        before = await honest_latencies(h, honest, hsid, asyncio.Event(), 1.0)
        triggers = []
        started = time.perf_counter()
        for i in range(20):
            agent_id = await make_agent(c, kp)
            trigger = await create_trigger(c, kp, agent_id, {"type": "schedule", "schedule": {
                "kind": "interval", "every": 1, "unit": "minutes"}}, name=f"tick{i}")
            triggers.append(trigger["id"])
        # Half a trigger hour after the first trigger was made (its slots every 0.1 s).
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(max(0.5, 3.0 - (time.perf_counter() - started)), stop.set)
        during = await honest_latencies(h, honest, hsid, stop, 10)
        firings = []
        for trigger_id in triggers:
            firings += (await get_trigger(c, kp, trigger_id))["firings"]
        created = [f for f in firings if f["status"] == "created"]
        held = [f for f in firings if f["status"] == "skipped" and "--account-trigger-firings-per-hour" in f["error"]]
        print(f"\n20 agents, half a trigger hour: {len(firings)} firings, {len(created)} created, {len(held)} held back"
              f" by the account bound; honest GetSession before p50 {percentile(before, 0.5) * 1000:.1f} ms, during"
              f" x{len(during)} p50 {percentile(during, 0.5) * 1000:.1f} ms p99 {percentile(during, 0.99) * 1000:.1f} ms")
        # (At most `bound` in any trigger hour: a slow machine may have let more than one pass.)
        hours = math.ceil((time.perf_counter() - started) * speed / 3600)
        assert len(created) <= bound * hours and len(held) >= 20, (len(created), len(held), hours)
        assert percentile(during, 0.5) < max(10 * percentile(before, 0.5), 0.1)
        assert percentile(during, 0.99) < 1.0
        await c.close()
        await h.close()
    finally:
        srv.kill()

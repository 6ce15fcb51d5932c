"""Issue 32, "Fair sharing" across a cluster: an account's limits (runs in flight, trigger
firings per hour) hold over every server sharing one PostgreSQL store, not per server. Two
server child processes on one fresh schema, a hanging fake model on loopback, and the account's
requests sent to both servers at once: the total admitted is the bound, however the requests
interleave (each server counts under the account's row lock, store/accounts.hold_account)."""
from __future__ import annotations

import asyncio

import httpx

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.runtime.test_fair_sharing import UNLIMITED_RATE, agents_with_sessions, text
from tests.triggers_helpers import create_trigger, get_trigger, make_agent
from tests.wsraw import V2Client, keypair

ROUNDS = 4     # bursts of concurrent requests to both servers


def two_servers(tmp_path, url: str, flags: list[str]) -> tuple[ServerProcess, ServerProcess]:
    a = ServerProcess(tmp_path / "a", extra=["--storage-url", url, *UNLIMITED_RATE, *flags]).start(timeout=60)
    try:
        b = ServerProcess(tmp_path / "b", extra=["--storage-url", url, *UNLIMITED_RATE, *flags]).start(timeout=60)
    except BaseException:
        a.kill()
        raise
    return a, b


async def test_runs_in_flight_hold_across_two_servers(tmp_path, postgres_url):
    a, b = two_servers(tmp_path, postgres_url, ["--max-runs-in-flight", "6"])
    try:
        async with FakeOpenAI(Script(hang=True)) as fake:
            kp = keypair("cluster flooder")
            ca, cb = await V2Client.open(a.url), await V2Client.open(b.url)
            try:
                sessions = await agents_with_sessions(ca, kp, fake.base_url, 4, 6)   # 24 sessions
                answers: dict[str, int] = {}

                async def ask(c: V2Client, sid: str, n: int) -> None:
                    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text(f"work {n}")},
                                     timeout=30)
                    key = r["_"] if r["_"] != "Error" else f"Error {r['status']}"
                    answers[key] = answers.get(key, 0) + 1
                    if r["_"] == "Error":
                        assert "--max-runs-in-flight 6" in r["message"], r

                n = 0
                for _ in range(ROUNDS):   # each round: every session asked once, half through each server
                    batch = []
                    for i, sid in enumerate(sessions):
                        batch.append(ask(ca if i % 2 else cb, sid, n))
                        n += 1
                    await asyncio.gather(*batch)
                runs = []
                for sid in sessions:
                    runs += (await ca.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
                live = sum(r["status"] in ("queued", "claimed", "running") for r in runs)
                print(f"\n{n} MessageSession over two servers: {answers}; {live} runs live")
                assert answers.get("MessageSessionResponse") == 6, answers
                assert answers.get("Error 429") == n - 6, answers
                assert live == 6 and len(runs) == 6
            finally:
                await ca.close()
                await cb.close()
    finally:
        a.kill()
        b.kill()


async def test_trigger_firings_per_account_hold_across_two_servers(tmp_path, postgres_url):
    """Six webhook triggers on three agents, each delivered to both servers at once: past the
    account's hourly bound every firing is recorded as skipped, whichever server took it."""
    a, b = two_servers(tmp_path, postgres_url, ["--account-trigger-firings-per-hour", "5",
                                                "--webhook-rate-limit", "1000"])
    try:
        kp = keypair("cluster triggers")
        c = await V2Client.open(a.url)
        try:
            hooks = []
            for i in range(3):
                agent_id = await make_agent(c, kp)
                for j in range(2):
                    trigger = await create_trigger(c, kp, agent_id, {"type": "webhook"}, name=f"hook{i}{j}")
                    hook = (await get_trigger(c, kp, trigger["id"]))["webhook"]
                    hooks.append((trigger["id"], hook["path"], hook["secret"]))
            statuses: list[str] = []
            async with httpx.AsyncClient(timeout=30) as http:
                async def deliver(port: int, path: str, secret: str, n: int) -> None:
                    r = await http.post(f"http://127.0.0.1:{port}{path}", json={"n": n},
                                        headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": f"k{port}-{n}"})
                    assert r.status_code == 202, r.text
                    statuses.append(r.json()["firingStatus"])

                for n in range(ROUNDS):
                    await asyncio.gather(*(deliver(srv.port, path, secret, n)
                                           for _, path, secret in hooks for srv in (a, b)))
            print(f"\n{len(statuses)} webhook deliveries over two servers: {statuses.count('created')} created")
            assert statuses.count("created") == 5, statuses
            assert statuses.count("skipped") == len(statuses) - 5
            created = 0
            for trigger_id, _, _ in hooks:
                firings = (await get_trigger(c, kp, trigger_id))["firings"]
                created += sum(f["status"] == "created" for f in firings)
                assert all("--account-trigger-firings-per-hour" in f["error"]
                           for f in firings if f["status"] == "skipped"), firings
            assert created == 5
        finally:
            await c.close()
    finally:
        a.kill()
        b.kill()


async def test_the_live_count_matches_the_runs_across_two_servers(tmp_path, postgres_url):
    """Issue 39: the runs in flight the limit reads are a count the runs' triggers keep, spread over
    slots (schema version 24). Two servers take, end and cancel one account's runs at once; after
    every burst the count equals the runs (read in one statement), and at the end it is 0, kept in
    more than one slot (so run ends did not all lock one row)."""
    from tests.server.store.test_store_live_runs import counts, live, model

    a, b = two_servers(tmp_path, postgres_url, ["--max-runs-in-flight", "1000"])
    try:
        async with FakeOpenAI() as fake:
            fake.default = model
            kp = keypair("cluster live count")
            ca, cb = await V2Client.open(a.url), await V2Client.open(b.url)
            try:
                sessions = await agents_with_sessions(ca, kp, fake.base_url, 2, 4)   # 8 sessions
                sent: list[tuple[V2Client, str]] = []

                async def ask(c: V2Client, sid: str, words: str) -> None:
                    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": text(words)}, timeout=30)
                    assert r["_"] == "MessageSessionResponse", r
                    sent.append((c, r["runId"]))

                for n in range(ROUNDS):
                    burst = []
                    for i, sid in enumerate(sessions):
                        c = ca if (i + n) % 2 else cb
                        words = f"hang {n}" if i == n else f"ok {n}"   # one session a round hangs
                        burst += [ask(c, sid, words), ask(c, sid, f"ok {n} again")]
                    await asyncio.gather(*burst)
                    # Cancel a few, each through the server that did not queue it.
                    await asyncio.gather(*(
                        (cb if c is ca else ca).call(kp, {"_": "CancelRun", "runId": run_id})
                        for c, run_id in sent[-len(sessions) * 2::5]))
                    live(postgres_url, kp.account_id)   # kept == counted, mid-flight
                # End every run still live (the hanging ones, and what waits behind them).
                for _ in range(20):
                    runs = []
                    for sid in sessions:
                        runs += (await ca.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
                    left = [r["id"] for r in runs if r["status"] in ("queued", "claimed", "running")]
                    if not left:
                        break
                    await asyncio.gather(*(cb.call(kp, {"_": "CancelRun", "runId": run_id}) for run_id in left))
                assert len(runs) == len(sent) and not left, left
                assert live(postgres_url, kp.account_id) == 0
                assert counts(postgres_url)[kp.account_id] == (0, 0)
                import psycopg
                with psycopg.connect(postgres_url, autocommit=True) as conn:
                    slots = conn.execute("SELECT count(*) FROM account_live_runs WHERE account_id = %s",
                                         (kp.account_id,)).fetchone()[0]
                print(f"\n{len(sent)} turns over two servers; the count kept in {slots} slots")
                assert slots > 1
            finally:
                await ca.close()
                await cb.close()
    finally:
        a.kill()
        b.kill()

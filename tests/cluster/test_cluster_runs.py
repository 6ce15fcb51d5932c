"""Runs across servers on one PostgreSQL store: claims, leases, requeue, exactly-once answers,
and StopSession reaching a run that another server executes.

Real servers (in-process, and one child process that is SIGKILLed) on one fresh PostgreSQL
schema each (tests/pg.py), a real fake provider on loopback, real sockets.
"""
from __future__ import annotations

import asyncio
import contextlib
from unittest.mock import ANY

import psycopg
import pytest

from seed_agents.server.database.url import parse_storage_url

from tests.conftest import make_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.procs import ServerProcess
from tests.waiting import until
from tests.wsraw import V2Client, flatten, keypair, setup_session

LEASE = 2.0   # seconds: short, so a lost server's runs come back within a test's time


def pg_config(tmp_path, url: str, name: str):
    cfg = make_config(tmp_path / name, run_lease=LEASE, run_poll_interval=0.2)
    cfg.storage_url = parse_storage_url(url)
    return cfg


@contextlib.asynccontextmanager
async def servers(tmp_path, url: str, count: int):
    from seed_agents.server.main import start_server

    running = []
    try:
        for i in range(count):
            running.append(await start_server(pg_config(tmp_path, url, f"s{i}")))
        yield running
    finally:
        for r in running:
            await r.stop()


async def send(c, kp, session_id: str, text: str) -> dict:
    r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                          "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    return r


async def events_of(c, kp, session_id: str) -> list[dict]:
    r = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
    assert r["_"] == "GetSessionResponse", r
    return r["events"]


async def session_info(c, kp, session_id: str) -> dict:
    return (await c.call(kp, {"_": "GetSession", "sessionId": session_id}))["session"]


async def wait_session(c, kp, session_id: str, status: str, timeout: float = 15.0) -> dict:
    """Polls GetSession (a condition, bounded in time) until the session has `status`."""
    async def has_status():
        got = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
        return got if got["session"]["status"] == status else None
    return await until(has_status, timeout, step=0.05, what=f"session {status}")


def messages(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["event"]["role"], e["event"]["content"]) for e in events if e["event"].get("type") == "message"]


async def test_a_turn_completes_on_postgresql(tmp_path, postgres_url):
    a = keypair("A")
    async with servers(tmp_path, postgres_url, 1) as (s,):
        c = await V2Client.open(s.url)
        _, sid = await setup_session(c, a)
        await c.call(a, {"_": "Subscribe", "key": f"sessions/{sid}"})
        await send(c, a, sid, "hello there")
        appends = []
        async with asyncio.timeout(10):
            while len(appends) < 2:
                appends += flatten(await c.event())
        assert [e["event"]["content"] for e in appends] == ["hello there", "echo: hello there"]
        got = await wait_session(c, a, sid, "idle")
        assert messages(got["events"]) == [("user", "hello there"), ("assistant", "echo: hello there")]
        runs = (await c.call(a, {"_": "ListRuns", "sessionId": sid}))["runs"]
        assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]
        await c.close()


async def test_a_message_claims_its_run_in_its_own_write(tmp_path, postgres_url):
    """MessageSession takes its run for this server in the transaction that queues it
    (server/runtime/leasing.py, `claim_in`): with the claim loop silenced, the run is this
    server's, running under its lease, as soon as the message is answered, and its turn is
    answered."""
    a = keypair("A")
    async with servers(tmp_path, postgres_url, 1) as (s,):
        leases = s.app.runtime.queue.leases
        leases.wake = lambda: None      # no claim pass on a kick, and the poll is far off
        leases.poll_every = 3600.0
        try:
            c = await V2Client.open(s.url)
            _, sid = await setup_session(c, a)
            await c.call(a, {"_": "Subscribe", "key": f"sessions/{sid}"})
            run_id = (await send(c, a, sid, "hello there"))["runId"]
            with psycopg.connect(s.app.db.url.dsn(), autocommit=True) as conn:
                status, owner = conn.execute(
                    "SELECT status, lease_owner FROM runs WHERE id = %s", (run_id,)).fetchone()
            # Committed with the message: running here, or already answered.
            assert (status, owner) in (("running", leases.owner), ("succeeded", None)), (status, owner)
            got = await wait_session(c, a, sid, "idle")
            assert messages(got["events"]) == [("user", "hello there"), ("assistant", "echo: hello there")]
            runs = (await c.call(a, {"_": "ListRuns", "sessionId": sid}))["runs"]
            assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]
            await c.close()
        finally:
            del leases.wake              # (the stop wakes the claim loop to end it)


async def provider_agent(c, kp, fake) -> str:
    """An agent of `kp` whose model is the fake OpenAI-compatible server; its id."""
    r = await c.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {
        "type": "custom", "baseUrl": fake.base_url}})
    assert r["_"] == "SetModelProviderResponse", r
    r = await c.call(kp, {"_": "CreateAgent", "definition": {
        "name": "Fake", "systemPrompt": "", "modelProvider": "fake", "model": "m"}})
    assert r["_"] == "CreateAgentResponse", r
    return r["agentId"]


async def new_session(c, kp, agent_id: str) -> str:
    r = await c.call(kp, {"_": "CreateSession", "agentId": agent_id})
    assert r["_"] == "CreateSessionResponse", r
    return r["sessionId"]


async def turn_at_the_provider(c, kp, fake, text: str) -> tuple[str, str, str]:
    """A new session of a new `provider_agent` whose first turn has reached the fake provider:
    (agent id, session id, run id)."""
    agent_id = await provider_agent(c, kp, fake)
    sid = await new_session(c, kp, agent_id)
    run_id = (await send(c, kp, sid, text))["runId"]
    await fake.wait_for_requests(1, timeout=10)
    return agent_id, sid, run_id


def runs_done(server) -> float:
    return sum(server.app.metrics.runs.labels(s)._value.get() for s in ("succeeded", "failed", "canceled"))


async def test_two_servers_answer_each_run_once_and_each_session_in_order(tmp_path, postgres_url):
    a = keypair("A")
    sessions, per_session = 6, 4
    async with FakeOpenAI(Script(echo=True, chunk_delay=0.01)) as fake, \
            servers(tmp_path, postgres_url, 2) as (s1, s2):
        c1, c2 = await V2Client.open(s1.url), await V2Client.open(s2.url)
        agent_id = await provider_agent(c1, a, fake)
        sids = [await new_session(c1, a, agent_id) for _ in range(sessions)]
        # Every session gets its messages at once, half through each server: the runs queue up
        # and both servers claim from the one queue.
        await asyncio.gather(*(send(c1 if i % 2 else c2, a, sid, f"s{i} m{k}")
                               for k in range(per_session) for i, sid in enumerate(sids)))
        for sid in sids:
            await wait_session(c1, a, sid, "idle", timeout=30)
        for i, sid in enumerate(sids):
            log = messages(await events_of(c2, a, sid))
            users = [text for role, text in log if role == "user"]
            got = [m for m in log if m[0] == "assistant"]
            # Every message arrived once (they were sent at once, so in any order), and each run
            # was answered once, in the session's order of its messages.
            assert sorted(users) == [f"s{i} m{k}" for k in range(per_session)], users
            assert got == [("assistant", f"echo: {text}") for text in users], got
            runs = (await c1.call(a, {"_": "ListRuns", "sessionId": sid}))["runs"]
            assert sorted((r["status"], r["attempt"]) for r in runs) == [("succeeded", 1)] * per_session
        # One provider call per run: no run was executed twice. (Which server takes which run
        # is a race; test_claimers_racing_on_one_queue_take_each_run_once races them harder.)
        assert len(fake.requests) == sessions * per_session
        assert runs_done(s1) + runs_done(s2) == sessions * per_session
        await c1.close(); await c2.close()


def run_row(url: str, run_id: str) -> tuple:
    """(status, lease_owner, lease_expires_at, attempt) of a run, read straight from PostgreSQL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT status, lease_owner, lease_expires_at, attempt FROM runs WHERE id = %s",
                            (run_id,)).fetchone()


async def test_a_dead_servers_run_is_requeued_after_its_lease_and_answered_once(tmp_path, postgres_url):
    a = keypair("A")
    async with FakeOpenAI(Script(echo=True)) as fake:
        fake.enqueue(Script(hang=True))   # the first turn (on the server that dies) never ends
        doomed = ServerProcess(tmp_path / "doomed", extra=[
            "--storage-url", postgres_url, "--run-lease", str(LEASE), "--run-poll-interval", "0.2"]).start()
        try:
            c = await V2Client.open(doomed.url)
            agent_id, sid, run_id = await turn_at_the_provider(c, a, fake, "survive this")
            await c.close()
            async with servers(tmp_path, postgres_url, 1) as (survivor,):
                # While the doomed server lives it renews its lease: the run outlives its first
                # lease and stays its own, however often the survivor looks for expired ones.
                _, owner, first_expiry, _ = await asyncio.to_thread(run_row, postgres_url, run_id)
                async def renewed() -> tuple | None:
                    row = await asyncio.to_thread(run_row, postgres_url, run_id)
                    return row if row[2] >= first_expiry + 1000 * LEASE else None

                row = await until(renewed, 3 * LEASE, step=0.1, what="the lease renewed past its first")
                assert row[:2] == ("running", owner) and len(fake.requests) == 1
                assert owner != survivor.app.runtime.queue.leases.owner
                # Nor did its start reset what the live server is doing.
                c = await V2Client.open(survivor.url)
                assert (await session_info(c, a, sid))["status"] == "streaming"
                assert (await c.call(a, {"_": "GetAgent", "agentId": agent_id}))["agent"]["status"] == "running"
                watcher = await V2Client.open(survivor.url)
                await watcher.call(a, {"_": "Subscribe", "key": f"sessions/{sid}"})
                doomed.kill()
                # A subscriber sees the dead turn end (done), then the new turn's partials.
                partials = []
                async with asyncio.timeout(4 * LEASE):
                    while not partials or "textDelta" in partials[-1] or len(partials) < 2:
                        e = await watcher.event()
                        if e["_"] == "appendPartial":
                            assert e["partialId"] == run_id
                            if set(e["patch"]) - {"activity", "usage"}:   # (live activity aside)
                                partials.append(e["patch"])
                assert partials[0] == {"done": True}
                assert "".join(p.get("textDelta", "") for p in partials) == "echo: survive this"
                await watcher.close()
                got = await wait_session(c, a, sid, "idle", timeout=4 * LEASE)
                assert messages(got["events"]) == [("user", "survive this"), ("assistant", "echo: survive this")]
                run = (await c.call(a, {"_": "GetRun", "runId": run_id}))["run"]
                assert (run["status"], run["attempt"]) == ("succeeded", 2)
                assert len(fake.requests) == 2
                assert await asyncio.to_thread(run_row, postgres_url, run_id) == ("succeeded", None, None, 2)
                agent = (await c.call(a, {"_": "GetAgent", "agentId": agent_id}))["agent"]
                assert agent["status"] == "idle"
                await c.close()
        finally:
            doomed.kill()


async def test_a_server_that_stops_renewing_loses_the_run_and_its_late_answer_is_dropped(tmp_path, postgres_url):
    """The holder lives on but renews nothing (its lease tasks end): the other server requeues
    the run after the lease and runs it; the holder's stale turn ends while that one still runs,
    and writes nothing (its lease is gone, though the run is 'running' again)."""
    a = keypair("A")
    async with FakeOpenAI(Script()) as fake, servers(tmp_path, postgres_url, 2) as both:
        fake.enqueue(Script(chunks=["stale"], first_delay=2.5 * LEASE),           # the holder's call
                     Script(chunks=["second", " server"], first_delay=2.5 * LEASE))  # the other's
        c = await V2Client.open(both[0].url)
        _, sid, run_id = await turn_at_the_provider(c, a, fake, "who answers?")
        holder = next(s for s in both if run_id in s.app.runtime.queue.leases.held)
        for task in holder.app.runtime.queue.leases._tasks:   # no more renewals, claims or requeues
            task.cancel()
        await fake.wait_for_requests(2, timeout=3 * LEASE)   # requeued, claimed by the other
        # the holder's stale turn ends...
        await until(lambda: not holder.app.runtime.workers, 3 * LEASE, what="the holder's worker ended")
        # ... and wrote nothing, while the other server's turn still runs.
        assert messages(await events_of(c, a, sid)) == [("user", "who answers?")]
        assert await asyncio.to_thread(run_row, postgres_url, run_id) == \
            ("running", next(s for s in both if s is not holder).app.runtime.queue.leases.owner, ANY, 2)
        got = await wait_session(c, a, sid, "idle", timeout=3 * LEASE)
        assert messages(got["events"]) == [("user", "who answers?"), ("assistant", "second server")]
        assert len(fake.requests) == 2
        run = (await c.call(a, {"_": "GetRun", "runId": run_id}))["run"]
        assert (run["status"], run["attempt"]) == ("succeeded", 2)
        await c.close()


async def hanging_turn(servers_, c, kp, fake):
    """A session whose turn hangs in the provider; (session id, run id, the server running it)."""
    _, sid, run_id = await turn_at_the_provider(c, kp, fake, "hang on")
    holder = next(s for s in servers_ if run_id in s.app.runtime.queue.leases.held)
    return sid, run_id, holder


@pytest.mark.parametrize("action", ["StopSession", "CancelRun"])
async def test_a_stop_sent_to_one_server_ends_the_turn_running_on_another(tmp_path, postgres_url, action):
    a = keypair("A")
    async with FakeOpenAI(Script(hang=True)) as fake, servers(tmp_path, postgres_url, 2) as both:
        c = await V2Client.open(both[0].url)
        sid, run_id, holder = await hanging_turn(both, c, a, fake)
        other = both[1] if holder is both[0] else both[0]
        c2 = await V2Client.open(other.url)
        if action == "StopSession":
            r = await c2.call(a, {"_": "StopSession", "sessionId": sid})
            assert r["_"] == "StopSessionResponse" and r["stopped"] is True, r
        else:
            r = await c2.call(a, {"_": "CancelRun", "runId": run_id})
            assert r["_"] == "CancelRunResponse" and r["canceled"] is True, r
        # The holder notices at its next renewal (a third of the lease) and drops the provider call.
        await fake.wait_for_disconnect(1, timeout=LEASE)
        await wait_session(c, a, sid, "idle", timeout=LEASE)
        stopped = [("user", "hang on"), ("assistant", "Stopped.")]   # the holder's turn says it stopped

        async def said_stopped() -> bool:
            return messages(await events_of(c, a, sid)) == stopped

        await until(said_stopped, LEASE, what="the holder's 'Stopped.'")
        run = (await c.call(a, {"_": "GetRun", "runId": run_id}))["run"]
        assert run["status"] == "canceled"
        # the holder's worker ended and wrote nothing more
        await until(lambda: not holder.app.runtime.workers, LEASE, what="the holder's worker ended")
        assert messages(await events_of(c2, a, sid)) == stopped
        assert run_id not in holder.app.runtime.queue.leases.held
        assert len(fake.requests) == 1
        await c.close(); await c2.close()


async def test_a_server_stopping_cleanly_hands_its_runs_back_at_once(tmp_path, postgres_url):
    """Its lease is long (30 s), yet the other server answers the run within seconds."""
    from seed_agents.server.main import start_server

    a = keypair("A")
    async with FakeOpenAI(Script(echo=True)) as fake:
        fake.enqueue(Script(hang=True))
        cfg = pg_config(tmp_path, postgres_url, "leaving")
        cfg.run_lease = 30.0
        leaving = await start_server(cfg)
        try:
            c = await V2Client.open(leaving.url)
            _, sid, run_id = await turn_at_the_provider(c, a, fake, "hand me over")
            await c.close()
        finally:
            await leaving.stop()
        assert (await asyncio.to_thread(run_row, postgres_url, run_id))[:3] == ("queued", None, None)
        async with servers(tmp_path, postgres_url, 1) as (other,):
            c = await V2Client.open(other.url)
            got = await wait_session(c, a, sid, "idle", timeout=5)
            assert messages(got["events"]) == [("user", "hand me over"), ("assistant", "echo: hand me over")]
            assert (await c.call(a, {"_": "GetRun", "runId": run_id}))["run"]["attempt"] == 2
            await c.close()


def account_and_agent(conn) -> None:
    """The rows the lease tests' sessions hang from: account "acc" and its agent "ag"."""
    from seed_agents.server.store import accounts, agents

    accounts.ensure_account(conn, "acc", 1)
    agents.create_agent(conn, "ag", "acc", {"name": "a", "systemPrompt": "", "modelProvider": "echo",
                                            "model": "m"}, "/x", 1)


async def test_leases_in_the_store(tmp_path, postgres_url):
    """seed_agents.server.store.leases on its own: claims in session order across owners, renewals only of
    what an owner holds, requeue on the database clock, and an old attempt never answers."""
    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.store import leases, runs, sessions

    db = PgDatabase(parse_storage_url(postgres_url))
    await db.start()
    try:
        def setup(conn):
            account_and_agent(conn)
            for s in ("s1", "s2"):
                sessions.create_session(conn, s, "acc", "ag", None, 1)
                for k in range(2):
                    runs.create_run(conn, f"{s}r{k}", "acc", "ag", s, None, 10 + k)

        await db.write(setup)
        first = await db.write(leases.claim, "X", 60_000, 20, 16)
        # One run per session, each its session's oldest; a second claimer finds nothing more.
        assert [(r["id"], r["status"], r["attempt"], r["startedAt"]) for r in first] == \
            [("s1r0", "running", 1, 20), ("s2r0", "running", 1, 20)]
        assert await db.write(leases.claim, "Y", 60_000, 20, 16) == []
        assert await db.write(leases.renew, "X", ["s1r0", "s2r0", "s1r1"], 60_000) == {"s1r0", "s2r0"}
        assert await db.write(leases.renew, "Y", ["s1r0"], 60_000) == set()
        # s1r0 ends: s1's next run becomes claimable, by anyone.
        await db.write(runs.move_run, first[0], "succeeded", 30)
        assert [r["id"] for r in await db.write(leases.claim, "Y", 1, 31, 16)] == ["s1r1"]
        # Y's 1 ms lease runs out (on the database's clock): requeued, lease cleared.
        requeued = await until(lambda: db.write(leases.requeue_expired, 40), 5, step=0.01, what="the run requeued")
        assert [(r["id"], r["status"]) for r in requeued] == [("s1r1", "queued")]
        assert await db.write(leases.renew, "Y", ["s1r1"], 60_000) == set()
        # Claimed again, by Y: the old attempt no longer holds it, the new one does.
        again = await db.write(leases.claim, "Y", 60_000, 50, 16)
        assert [(r["id"], r["attempt"]) for r in again] == [("s1r1", 2)]
        assert await db.write(leases.holds, "s1r1", "Y", 1) is False
        assert await db.write(leases.holds, "s1r1", "Y", 2) is True
        # Moves out of running end the lease (runs_lease_check would refuse them otherwise).
        await db.write(runs.move_run, again[0], "canceled", 60)
        assert await db.write(leases.release, "X", ["s2r0"], 70) != []
        assert await asyncio.to_thread(run_row, postgres_url, "s1r1") == ("canceled", None, None, 2)
        assert await asyncio.to_thread(run_row, postgres_url, "s2r0") == ("queued", None, None, 1)
    finally:
        await db.close()


async def test_a_claim_finds_a_session_behind_a_deep_queue(tmp_path, postgres_url):
    """A session with more queued runs than a claim looks at first (store/leases.py _EARLY) and
    a run already live: the claim still finds the other sessions' oldest runs behind that queue,
    in queue order, and never a second run of a busy or parked session."""
    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.store import leases, runs, sessions

    deep = leases._EARLY + 36
    db = PgDatabase(parse_storage_url(postgres_url))
    await db.start()
    try:
        def setup(conn):
            account_and_agent(conn)
            for s in ("deep", "late", "parked"):
                sessions.create_session(conn, s, "acc", "ag", None, 1)
            for k in range(deep):
                runs.create_run(conn, f"deep{k:03d}", "acc", "ag", "deep", None, 10 + k)
            runs.create_run(conn, "parked0", "acc", "ag", "parked", None, 5)
            conn.execute("UPDATE runs SET status = 'waiting' WHERE id = 'parked0'")
            runs.create_run(conn, "parked1", "acc", "ag", "parked", None, 6)
            runs.create_run(conn, "late0", "acc", "ag", "late", None, 10_000)
            runs.create_run(conn, "late1", "acc", "ag", "late", None, 10_001)

        await db.write(setup)
        # Nothing live yet: the deep session's head and the late session's, oldest first.
        first = await db.write(leases.claim, "X", 60_000, 20, 16)
        assert [r["id"] for r in first] == ["deep000", "late0"]
        # Both sessions busy now, the parked one still parked: the queue holds nothing claimable.
        assert await db.write(leases.claim, "X", 60_000, 20, 16) == []
        # The late session's run ends: its next run is claimable, behind all of the deep queue.
        await db.write(runs.move_run, first[1], "succeeded", 30)
        assert [r["id"] for r in await db.write(leases.claim, "Y", 60_000, 31, 16)] == ["late1"]
        # The deep session's run ends: the next in its queue, and only that one.
        await db.write(runs.move_run, first[0], "succeeded", 40)
        assert [r["id"] for r in await db.write(leases.claim, "Y", 60_000, 41, 16)] == ["deep001"]
    finally:
        await db.close()


async def test_claimers_racing_on_one_queue_take_each_run_once(tmp_path, postgres_url):
    """Three claimers, each with its own connections (as three servers have), drain one queue
    at once: every run is claimed exactly once, and each session's runs in order."""
    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.store import leases, runs, sessions

    n_sessions, per_session = 8, 5
    dbs = [PgDatabase(parse_storage_url(postgres_url)) for _ in range(3)]
    for db in dbs:
        await db.start()
    try:
        def setup(conn):
            account_and_agent(conn)
            for i in range(n_sessions):
                sessions.create_session(conn, f"s{i}", "acc", "ag", None, 1)
            for k in range(per_session):   # interleaved, as messages to many sessions arrive
                for i in range(n_sessions):
                    runs.create_run(conn, f"s{i}r{k}", "acc", "ag", f"s{i}", None, 10)

        await dbs[0].write(setup)
        taken: list[tuple[str, dict]] = []

        async def claimer(name: str, db) -> None:
            while len(taken) < n_sessions * per_session:
                got = await db.write(leases.claim, name, 60_000, 20, 3)
                for run in got:
                    taken.append((name, run))
                    await db.write(runs.move_run, run, "succeeded", 30)
                if not got:   # the others hold the rest: a claimer's poll interval, as a server's
                    await asyncio.sleep(0.005)

        async with asyncio.timeout(15):
            await asyncio.gather(*(claimer(f"c{i}", db) for i, db in enumerate(dbs)))
        ids = [run["id"] for _, run in taken]
        assert sorted(ids) == sorted(f"s{i}r{k}" for i in range(n_sessions) for k in range(per_session))
        assert all(run["attempt"] == 1 for _, run in taken)
        for i in range(n_sessions):
            assert [x for x in ids if x.startswith(f"s{i}r")] == [f"s{i}r{k}" for k in range(per_session)]
    finally:
        for db in dbs:
            await db.close()

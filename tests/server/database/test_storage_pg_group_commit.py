"""PostgreSQL's group commit (server/database/postgres/database.py, `_run_batch`): several jobs
in one transaction, each in its own savepoint, and a batch that never waits for a row lock while
it holds others (docs/storage.md, "Group commit on PostgreSQL").

The writer is held on a first job (a threading.Event) while the others queue behind it, so they
reach the writer as one batch; the checks read what committed through a connection of their own.
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import psycopg
from seed_agents.protocol.api import history
from seed_agents.server.database import parse_storage_url
from seed_agents.server.database.postgres.database import BATCH_LOCK_WAIT_MS, PgDatabase
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

T0 = 1_700_000_000_000
WAIT_S = 30


async def open_db(url: str) -> PgDatabase:
    db = PgDatabase(parse_storage_url(url))
    await db.start()
    return db


def make_table(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE gc_rows (k integer PRIMARY KEY, v integer NOT NULL)")
        conn.execute("INSERT INTO gc_rows SELECT g, 0 FROM generate_series(1, 4) g")


def put(conn, k: int, v: int) -> int:
    conn.execute("INSERT INTO gc_rows (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v", (k, v))
    return k


def rows(url: str) -> dict[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(conn.execute("SELECT k, v FROM gc_rows").fetchall())


async def hold_writer(db: PgDatabase) -> tuple[threading.Event, asyncio.Future]:
    """A first job that keeps the writer busy until the event is set: what is submitted meanwhile
    reaches the writer as one batch."""
    release = threading.Event()
    started = threading.Event()

    def blocker(conn):
        started.set()
        if not release.wait(WAIT_S):
            raise TimeoutError("the test never released the writer")
        return "held"

    fut = asyncio.ensure_future(db.write(blocker))
    deadline = time.monotonic() + WAIT_S
    while not started.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    assert started.is_set()
    return release, fut


async def test_a_batch_commits_once_and_a_failing_job_takes_none_of_its_batch_mates_down(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    try:
        release, first = await hold_writer(db)
        batches_before = db.batches

        def half_then_fail(conn):
            put(conn, 101, 1)            # written, then rolled back with its savepoint
            raise ValueError("the job's own failure")

        def bad_sql(conn):
            put(conn, 102, 1)
            conn.execute("INSERT INTO gc_rows (k, v) VALUES (?, NULL)", (103,))   # NOT NULL

        futs = [asyncio.ensure_future(db.write(put, 10, 1)),
                asyncio.ensure_future(db.write(half_then_fail)),
                asyncio.ensure_future(db.write(put, 11, 2)),
                asyncio.ensure_future(db.write(bad_sql)),
                asyncio.ensure_future(db.write(put, 12, 3))]
        await asyncio.sleep(0.05)   # all five queued behind the held job
        release.set()
        assert await first == "held"
        results = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), WAIT_S)
        assert results[0] == 10 and results[2] == 11 and results[4] == 12
        assert isinstance(results[1], ValueError)
        assert isinstance(results[3], psycopg.errors.NotNullViolation)
        got = rows(postgres_url)
        assert {k: got[k] for k in (10, 11, 12)} == {10: 1, 11: 2, 12: 3}
        assert not {101, 102, 103} & set(got)      # the failed jobs left nothing
        assert db.batches - batches_before == 2    # the held job alone, then the five in one
    finally:
        await db.close()


async def test_a_batch_does_not_wait_on_a_held_lock_it_commits_the_jobs_before_it(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    other = psycopg.connect(postgres_url)
    try:
        other.execute("UPDATE gc_rows SET v = 99 WHERE k = 2")   # holds row 2 until it commits
        release, first = await hold_writer(db)
        a = asyncio.ensure_future(db.write(put, 1, 7))
        b = asyncio.ensure_future(db.write(put, 2, 8))   # waits for the other transaction
        c = asyncio.ensure_future(db.write(put, 3, 9))
        await asyncio.sleep(0.05)
        release.set()
        await first
        # The job before the locked row committed while the lock is still held elsewhere.
        assert await asyncio.wait_for(a, WAIT_S) == 1
        assert rows(postgres_url)[1] == 7
        assert not b.done() and not c.done()       # b waits alone, c after it (submission order)
        other.commit()
        assert await asyncio.wait_for(b, WAIT_S) == 2 and await asyncio.wait_for(c, WAIT_S) == 3
        assert {k: v for k, v in rows(postgres_url).items() if k <= 3} == {1: 7, 2: 8, 3: 9}
    finally:
        other.close()
        await db.close()


async def test_two_writers_batches_crossing_locks_neither_deadlocks_nor_loses_a_job(postgres_url):
    """Two servers' batches, each locking row 1 then 2 and 2 then 1: the wait-for cycle is
    broken by a batch giving up its wait within BATCH_LOCK_WAIT_MS, never by a deadlock error;
    every job commits once."""
    one, two = await open_db(postgres_url), await open_db(postgres_url)
    make_table(postgres_url)
    try:
        in_first = threading.Barrier(2, timeout=WAIT_S)

        def lock_then_meet(conn, k: int, v: int):
            put(conn, k, v)
            in_first.wait()     # both batches now hold their first row
            return k

        r1, f1 = await hold_writer(one)
        r2, f2 = await hold_writer(two)
        jobs = [asyncio.ensure_future(one.write(lock_then_meet, 1, 11)),
                asyncio.ensure_future(one.write(put, 2, 12)),
                asyncio.ensure_future(two.write(lock_then_meet, 2, 21)),
                asyncio.ensure_future(two.write(put, 1, 22))]
        await asyncio.sleep(0.05)
        t0 = time.monotonic()
        r1.set()
        r2.set()
        await f1
        await f2
        assert await asyncio.wait_for(asyncio.gather(*jobs), WAIT_S) == [1, 2, 2, 1]
        # Far below PostgreSQL's deadlock_timeout (1 s): no deadlock was waited out.
        assert time.monotonic() - t0 < 0.9
        got = rows(postgres_url)
        assert got[1] in (11, 22) and got[2] in (12, 21)
    finally:
        await one.close()
        await two.close()


async def test_three_writers_appending_to_the_same_sessions_keep_seqs_dense(postgres_url):
    dbs = [await open_db(postgres_url) for _ in range(3)]
    account, agent = "acct-" + uuid.uuid4().hex[:8], str(uuid.uuid4())
    sessions = [str(uuid.uuid4()) for _ in range(3)]

    def setup(conn):
        agents_q.create_agent(conn, agent, account, {"name": "a", "systemPrompt": "", "modelProvider": "echo",
                                                     "model": "echo"}, "/tmp/none", T0)
        for sid in sessions:
            sessions_q.create_session(conn, sid, account, agent, "s", T0)

    await dbs[0].write(setup)
    per_writer = 60

    async def writer(w: int, db: PgDatabase) -> list:
        futs = []
        for i in range(per_writer):
            sid = sessions[(i + w) % len(sessions)]   # each writer crosses the sessions in its own order
            futs.append(asyncio.ensure_future(db.write(
                events_q.append_event, sid, {"role": "user", "content": f"{w}-{i}"}, f"ev-{w}-{i}", T0)))
            if i % 7 == 0:
                await asyncio.sleep(0)
        return await asyncio.gather(*futs)

    try:
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(writer(w, db) for w, db in enumerate(dbs))), WAIT_S * 2)
        elapsed = time.monotonic() - t0
        assert sum(db.jobs for db in dbs) >= 3 * per_writer
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for sid in sessions:
                seqs = [r[0] for r in conn.execute(
                    "SELECT seq FROM session_events WHERE session_id = %s ORDER BY seq", (sid,))]
                assert seqs == list(range(1, len(seqs) + 1))
            contents = [r[0] for r in conn.execute(
                "SELECT id FROM session_events WHERE session_id = ANY(%s)", (sessions,))]
        assert sorted(contents) == sorted(f"ev-{w}-{i}" for w in range(3) for i in range(per_writer))
        assert elapsed < WAIT_S, elapsed
    finally:
        for db in dbs:
            await db.close()


async def test_replay_claims_committed_in_batches_give_each_signature_to_one_server(postgres_url):
    """Durable and fast claims go in batches (one statement, one commit each); two servers
    claiming the same signatures at once, in opposite orders, each signature is held once."""
    one, two = await open_db(postgres_url), await open_db(postgres_url)
    try:
        sigs = [bytes([i]) * 64 for i in range(1, 81)]
        for durable in (True, False):
            now = T0 if durable else T0 + 1_000_000   # the second round takes the expired ones over
            got = await asyncio.wait_for(asyncio.gather(
                *(one.claim_signature(s, now + 60_000, now, durable=durable) for s in sigs),
                *(two.claim_signature(s, now + 60_000, now, durable=durable) for s in reversed(sigs)),
                *(one.claim_signature(s, now + 60_000, now, durable=durable) for s in sigs[:10])), WAIT_S)
            mine, theirs, again = got[:80], got[80:160][::-1], got[160:]
            assert all(a != b for a, b in zip(mine, theirs)), "each signature held by exactly one server"
            assert again == [False] * 10   # already held (by this server or the other)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            held = dict(conn.execute("SELECT sig, expires_at FROM accepted_signatures").fetchall())
        assert {bytes(k) for k in held} == set(sigs)
        assert set(held.values()) == {T0 + 1_000_000 + 60_000}
    finally:
        await one.close()
        await two.close()


async def test_an_append_that_waited_for_another_servers_append_chains_to_it(postgres_url):
    """Two servers append to one session at once: the second's UPDATE waits for the first's row
    lock, and its snapshot predates the first's commit, so the predecessor's link it needs is
    not in that snapshot; it reads it again (store/events.append_event) and the chain holds."""
    one, two = await open_db(postgres_url), await open_db(postgres_url)
    account, agent, sid = "acct-" + uuid.uuid4().hex[:8], str(uuid.uuid4()), str(uuid.uuid4())

    def setup(conn):
        agents_q.create_agent(conn, agent, account, {"name": "a", "systemPrompt": "", "modelProvider": "echo",
                                                     "model": "echo"}, "/tmp/none", T0)
        sessions_q.create_session(conn, sid, account, agent, "s", T0)
        events_q.append_event(conn, sid, {"role": "user", "content": "first"}, "ev-1", T0)

    release, holding = threading.Event(), threading.Event()

    def append_and_hold(conn):
        appended = events_q.append_event(conn, sid, {"role": "user", "content": "second"}, "ev-2", T0 + 1)
        holding.set()
        if not release.wait(3 * WAIT_S):   # the session's row stays locked until this job commits
            raise TimeoutError("the test never released the first append")
        return appended

    try:
        await one.write(setup)
        first = asyncio.ensure_future(one.write(append_and_hold))
        assert await asyncio.to_thread(holding.wait, WAIT_S)   # seq 2 appended, not committed
        with psycopg.connect(postgres_url, autocommit=True) as watch:
            def waiting() -> int:
                return watch.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                     " AND query LIKE 'UPDATE sessions SET last_seq%%'").fetchone()[0]
            second = asyncio.ensure_future(two.write(
                events_q.append_event, sid, {"role": "user", "content": "third"}, "ev-3", T0 + 2))
            deadline = time.monotonic() + 2 * WAIT_S   # a loaded machine's writer may take seconds
            while not waiting() and time.monotonic() < deadline:   # the second append waits on the lock
                await asyncio.sleep(0.01)
            assert waiting(), "the second append never waited for the first's row lock"
        release.set()
        await asyncio.wait_for(first, WAIT_S)
        event, _ = await asyncio.wait_for(second, WAIT_S)
        assert event["seq"] == 3
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            rows_ = conn.execute("SELECT seq, created_at, body, link FROM session_events WHERE session_id = %s"
                                 " ORDER BY seq", (sid,)).fetchall()
        prev = None
        for seq, created_at, body, link in rows_:
            assert link is not None, f"event {seq} was left unlinked"
            prev = history.link(sid, seq, prev, bytes(body), created_at)
            assert bytes(link) == prev, f"event {seq} does not chain to event {seq - 1}"
        assert [r[0] for r in rows_] == [1, 2, 3]
    finally:
        release.set()
        await one.close()
        await two.close()

"""Issue 39, "What still grows with the queue: the accept": an account's runs in flight are a
count kept in `account_live_runs` by the runs' triggers (schema version 24), read by
`store/turns.in_flight` in place of counting the runs. The count must equal the runs at every
commit, on both backends: after turns, failures, cancels, a crash mid-turn and restarts (servers
as child processes on real sockets), from the runs a database already held when it is migrated,
and on PostgreSQL without one row that every run end of an account must lock."""
from __future__ import annotations

import asyncio

import apsw
import psycopg
import pytest

from seed_agents import schema
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import turns as turns_q

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.server.database.test_storage_postgres import open_db, target_at
from tests.server.runtime.test_fair_sharing import UNLIMITED_RATE, storage_flags  # noqa: F401  (fixture)
from tests.server.runtime.test_tool_loop import agent_session
from tests.waiting import until
from tests.wsraw import V2Client, keypair

LIVE = "('queued', 'claimed', 'running')"
# Per account, in one statement (one snapshot on both backends): the count as kept, and as
# counted from the runs (a run is its agent's account's).
COUNTS = f"""
SELECT a.account_id,
       (SELECT coalesce(sum(c.live), 0) FROM account_live_runs c WHERE c.account_id = a.account_id),
       (SELECT count(*) FROM runs r JOIN agents g ON g.id = r.agent_id
        WHERE g.account_id = a.account_id AND r.status IN {LIVE})
FROM (SELECT account_id FROM agents UNION SELECT account_id FROM account_live_runs) a
"""


_END = "UPDATE runs SET status = 'succeeded', lease_owner = NULL, lease_expires_at = NULL WHERE id = %s"


def counts(where: str) -> dict[str, tuple[int, int]]:
    """{account: (kept, counted)} of a SQLite file or a PostgreSQL URL."""
    if where.startswith("postgresql://"):
        with psycopg.connect(where, autocommit=True) as conn:
            rows = conn.execute(COUNTS).fetchall()
    else:
        conn = apsw.Connection(where, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows = conn.execute(COUNTS).fetchall()
        finally:
            conn.close()
    return {account: (int(kept), int(counted)) for account, kept, counted in rows}


def live(where: str, account: str) -> int:
    """The account's runs in flight; fails unless the kept count equals the runs."""
    found = counts(where)
    assert all(kept == counted for kept, counted in found.values()), found
    return found.get(account, (0, 0))[1]


def last_user(body: dict) -> str:
    texts = [m["content"] for m in body.get("messages", ()) if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return texts[-1] if texts else ""


def model(request) -> Script:
    """By the turn's message: "ok" answers, "fail" is refused, "hang" never ends."""
    text = last_user(request.body or {})
    if text.startswith("fail"):
        return Script(status=400, error_body='{"error": {"message": "refused"}}')
    if text.startswith("hang"):
        return Script(hang=True)
    return Script(chunks=["done"])


async def send(c: V2Client, kp, sid: str, text: str) -> str:
    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    return r["runId"]


async def statuses(c: V2Client, kp, sids: list[str]) -> dict[str, str]:
    out = {}
    for sid in sids:
        for run in (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]:
            out[run["id"]] = run["status"]
    return out


async def test_the_count_follows_turns_failures_cancels_a_crash_and_restarts(tmp_path, storage_flags):
    where = storage_flags[1] if storage_flags else str(tmp_path / "srv" / "agents.sqlite")
    flags = ["--max-runs-in-flight", "5", *UNLIMITED_RATE, *storage_flags]
    srv = ServerProcess(tmp_path / "srv", extra=flags).start(timeout=60)
    try:
        async with FakeOpenAI() as fake:
            fake.default = model
            kp, other = keypair("live-count"), keypair("live-count other")
            c = await V2Client.open(srv.url)
            agent_id, s1 = await agent_session(c, kp, "custom", fake.base_url)
            s2 = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
            sids = [s1, s2]
            # A turn that ends, one that fails.
            ok = await send(c, kp, s1, "ok 1")
            failed = await send(c, kp, s2, "fail 1")

            async def ended() -> bool:
                got = await statuses(c, kp, sids)
                return got.get(ok) == "succeeded" and got.get(failed) == "failed"
            await until(ended, 30, what="a turn succeeded and one failed")
            assert live(where, kp.account_id) == 0
            # Live runs: a hanging turn in each session and two queued behind the first; another
            # account's turn is counted apart.
            hung = [await send(c, kp, s1, "hang 1"), await send(c, kp, s2, "hang 2")]
            queued = [await send(c, kp, s1, "ok 2"), await send(c, kp, s1, "ok 3")]
            oc = await V2Client.open(srv.url)
            _, os1 = await agent_session(oc, other, "custom", fake.base_url)
            await send(oc, other, os1, "hang other")
            assert live(where, kp.account_id) == 4 and live(where, other.account_id) == 1
            # The limit is the count: a fifth is taken, a sixth refused.
            fifth = await send(c, kp, s2, "ok 4")
            r = await c.call(kp, {"_": "MessageSession", "sessionId": s2, "content": [{"type": "text", "text": "x"}]})
            assert r["_"] == "Error" and r["status"] == 429 and "has 5 runs queued or running" in r["message"], r
            # A queued run canceled.
            r = await c.call(kp, {"_": "CancelRun", "runId": queued[1]})
            assert r["canceled"] is True, r
            assert live(where, kp.account_id) == 4

            async def running() -> bool:
                got = await statuses(c, kp, sids)
                return all(got.get(run) == "running" for run in hung)
            await until(running, 30, what="both hanging turns running")
            await c.close()
            await oc.close()
            # A crash mid-turn: the runs stay as the last commit left them, the count with them.
            srv.kill()
            assert live(where, kp.account_id) == 4 and live(where, other.account_id) == 1
            # The restart puts the interrupted runs back in the queue; the count stays the runs'.
            srv.start(timeout=60)
            assert live(where, kp.account_id) == 4
            c = await V2Client.open(srv.url)
            await until(running, 30, what="the hanging turns running again after the restart")
            assert live(where, kp.account_id) == 4
            # Cancels end the rest; a clean stop and a start change nothing.
            for run in (*hung, queued[0], fifth):
                await c.call(kp, {"_": "CancelRun", "runId": run})
            assert live(where, kp.account_id) == 0
            await c.close()
            assert srv.terminate() == 0
            srv.start(timeout=60)
            assert live(where, kp.account_id) == 0 and live(where, other.account_id) == 1
            c = await V2Client.open(srv.url)
            ok = await send(c, kp, s1, "ok again")

            async def answered() -> bool:
                return (await statuses(c, kp, [s1])).get(ok) == "succeeded"
            await until(answered, 30, what="a turn after the restarts")
            assert live(where, kp.account_id) == 0
            await c.close()
    finally:
        srv.kill()


def _v23_rows(execute, pg: bool) -> None:  # noqa: ANN001
    """Two accounts' agents and runs in every status, as version 23 holds them (on PostgreSQL a
    claimed or running run holds a lease)."""
    for account, agent in (("acct-a", "a1"), ("acct-a", "a2"), ("acct-b", "b1")):
        execute(f"INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
                f" VALUES ('{agent}', '{account}', {BLOB[pg]}, '/tmp/{agent}', 'idle', 1, 1)")
    runs = [("a1", "queued"), ("a1", "queued"), ("a1", "running"), ("a1", "succeeded"), ("a2", "claimed"),
            ("a2", "waiting"), ("a2", "failed"), ("a2", "canceled"), ("b1", "running"), ("b1", "succeeded")]
    for n, (agent, status) in enumerate(runs):
        lease = ", 'srv', 9000000000000" if pg and status in ("claimed", "running") else ", NULL, NULL" if pg else ""
        execute(f"INSERT INTO runs (id, account_id, agent_id, status, created_at, updated_at, root_run_id"
                f"{', lease_owner, lease_expires_at' if pg else ''})"
                f" VALUES ('r{n}', 'someone', '{agent}', '{status}', {n}, {n}, 'r{n}'{lease})")


BLOB = {False: "x'a0'", True: "'\\xa0'::bytea"}


async def test_a_version_23_sqlite_database_is_seeded_from_its_runs(tmp_path):
    path = str(tmp_path / "agents.sqlite")
    conn = apsw.Connection(path)
    for version, sql in schema.migrations():
        if version <= 23:
            conn.execute(sql)
    conn.execute("PRAGMA user_version = 23")
    _v23_rows(conn.execute, False)
    conn.close()
    db = Database(path)
    await db.start()
    try:
        # (runs.account_id is not what counts: the run's agent's account is.)
        assert db.read(turns_q.in_flight, "acct-a", 100) == 4 and db.read(turns_q.in_flight, "acct-b", 100) == 1
        assert db.read(turns_q.in_flight, "acct-a", 3) == 3
        assert db.read(turns_q.in_flight, "someone", 100) == 0
    finally:
        await db.close()
    assert counts(path) == {"acct-a": (4, 4), "acct-b": (1, 1)}


async def test_a_version_23_postgresql_database_is_seeded_from_its_runs(postgres_url):
    await (await open_db(postgres_url, target=target_at(23))).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        _v23_rows(conn.execute, True)
    db = await open_db(postgres_url)
    try:
        assert db.read(turns_q.in_flight, "acct-a", 100) == 4 and db.read(turns_q.in_flight, "acct-b", 100) == 1
    finally:
        await db.close()
    assert counts(postgres_url) == {"acct-a": (4, 4), "acct-b": (1, 1)}


async def test_run_ends_of_one_account_on_two_connections_do_not_wait_for_each_other(postgres_url):
    """The count is spread over slots by transaction: two transactions ending runs of one account
    at once lock different rows (unless their ids meet modulo 16; then the pair is retried), so
    the second ends its run while the first still holds its own."""
    await (await open_db(postgres_url)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        _v23_rows(conn.execute, True)
        conn.execute("UPDATE runs SET status = 'running', lease_owner = 'srv', lease_expires_at = 9000000000000"
                     " WHERE status IN ('succeeded', 'failed', 'canceled', 'waiting')")
    with psycopg.connect(postgres_url) as first, psycopg.connect(postgres_url) as second:
        ended = 0
        for _ in range(5):
            xid1 = int(first.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            xid2 = int(second.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            if xid1 % 16 == xid2 % 16:
                first.rollback()
                second.rollback()
                continue
            a, b = [r[0] for r in first.execute(
                "SELECT id FROM runs WHERE agent_id IN ('a1', 'a2') AND status = 'running' ORDER BY id LIMIT 2")]
            first.execute(_END, (a,))
            # While `first` holds its slot's row: no wait (a wait would end in lock_timeout's error).
            second.execute("SELECT set_config('lock_timeout', '200ms', true)")
            second.execute(_END, (b,))
            second.commit()
            first.commit()
            ended = 2
            break
        assert ended == 2, "five pairs of transactions met on one slot"
    found = counts(postgres_url)
    assert found["acct-a"] == (6, 6), found   # 8 live after the first UPDATE, two ended

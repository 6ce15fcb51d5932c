"""An agent's row written once per batch, at its end (server/database/end_writes.py, store/agents.py;
docs/storage.md "Group commit on PostgreSQL"): PostgreSQL's writer folds the activity rollup,
the touches and the status of a batch's jobs and writes each agent's row after the last job,
so another server's batch waits for that row only during this one's end writes and COMMIT.

What a user would see is unchanged: every AgentInfo a job returns (what the change notices
carry) and the row that commits are those of the same jobs run one at a time with each write
made at once, as SQLite's writer still makes them; a job rolled back leaves nothing of its
activity behind.
"""
from __future__ import annotations

import asyncio
import time

import psycopg
from seed_agents.server.database import parse_storage_url
from seed_agents.server.database.postgres.database import PgDatabase
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.server.database.test_storage_pg_group_commit import hold_writer

T0 = 1_700_000_000_000
WAIT_S = 30
ACCOUNT = "z6MkAccount"
AGENT = "a0000000-0000-4000-8000-000000000001"
S1 = "50000000-0000-4000-8000-000000000001"
S2 = "50000000-0000-4000-8000-000000000002"
DEFINITION = {"name": "a", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


def setup(conn) -> None:
    agents_q.create_agent(conn, AGENT, ACCOUNT, DEFINITION, "/tmp/a", T0)
    sessions_q.create_session(conn, S1, ACCOUNT, AGENT, "one", T0)
    sessions_q.create_session(conn, S2, ACCOUNT, AGENT, "two", T0)


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": text}


# The jobs of a turn and its neighbours, in submission order: each returns what a handler or
# the runtime would publish. The clock steps backwards once (job 5), which the rollup's max()
# must absorb as it does when each write is made at once.
def user_turn(conn):
    events_q.append_event(conn, S1, message("user", "hello"), "e1", T0 + 10)
    return agents_q.touch_agent(conn, AGENT, T0 + 10)


def claim(conn):
    return agents_q.set_agent_status(conn, AGENT, "running", T0 + 20)


def reply(conn):
    events_q.append_event(conn, S1, {"type": "tool_call", "name": "read"}, "e2", T0 + 30)
    events_q.append_event(conn, S2, message("assistant", "hi"), "e3", T0 + 40)
    return agents_q.get_agent(conn, AGENT)


def rolled_back(conn):
    events_q.append_event(conn, S2, message("user", "lost"), "e4", T0 + 1000)
    agents_q.set_agent_status(conn, AGENT, "error", T0 + 1000)
    raise ValueError("this job fails: nothing of it may remain")


def late_clock(conn):
    events_q.append_event(conn, S1, {"type": "status", "status": "idle"}, "e5", T0 + 35)
    return agents_q.set_agent_status(conn, AGENT, "idle", T0 + 35)


JOBS = (user_turn, claim, reply, rolled_back, late_clock)


def results_at_once(path: str) -> tuple[list, dict]:
    """The jobs one at a time on SQLite, where every write is made at once."""
    db = Database(path)
    db.start_sync()
    try:
        db.write_sync(setup)
        out = []
        for job in JOBS:
            try:
                out.append(db.write_sync(job))
            except ValueError as exc:
                out.append(str(exc))
        return out, db.write_sync(agents_q.get_agent, AGENT)
    finally:
        db.close_sync()


async def test_a_batch_returns_and_commits_what_its_jobs_would_one_at_a_time(postgres_url, tmp_path):  # noqa: F811
    db = PgDatabase(parse_storage_url(postgres_url))
    await db.start()
    try:
        await db.write(setup)
        release, first = await hold_writer(db)
        batches = db.batches
        futures = [asyncio.ensure_future(db.write(job)) for job in JOBS]
        await asyncio.sleep(0.05)   # all queued behind the held writer: one batch
        release.set()
        await first
        got = []
        for fut in futures:
            try:
                got.append(await asyncio.wait_for(fut, WAIT_S))
            except ValueError as exc:
                got.append(str(exc))
        assert db.batches - batches == 2, "the held job alone, then the five in one"
        final = await db.write(agents_q.get_agent, AGENT)
    finally:
        await db.close()
    expected, expected_final = results_at_once(str(tmp_path / "at-once.sqlite"))
    assert got == expected
    assert final == expected_final
    assert final["status"] == "idle" and final["activity"] == {
        "at": T0 + 40, "kind": "status", "sessionId": S2, "messageAt": T0 + 40, "messageFrom": "assistant"}


async def test_a_batch_takes_an_agent_row_only_at_its_end(postgres_url):  # noqa: F811
    """Another transaction holds the agent's row (as another server's end writes and COMMIT do).
    Before, the batch's first append waited for it past the batch's lock bound and was cut, to
    wait alone; now every job runs at once, the batch waits at its end only, and all of it
    commits in one transaction once the row is free."""
    db = PgDatabase(parse_storage_url(postgres_url))
    await db.start()
    try:
        await db.write(setup)
        holder = psycopg.connect(postgres_url, autocommit=False)
        try:
            holder.execute("SELECT 1 FROM agents WHERE id = %s FOR NO KEY UPDATE", (AGENT,))
            release, first = await hold_writer(db)
            batches = db.batches
            appended = [asyncio.ensure_future(db.write(
                lambda conn, i=i: events_q.append_event(conn, (S1, S2)[i % 2], message("user", f"m{i}"),
                                                        f"m{i}", T0 + 100 + i)[0]["seq"]))
                for i in range(6)]
            await asyncio.sleep(0.05)
            release.set()
            await first
            # The batch's jobs have run and it waits for the row: nothing committed yet.

            def committed() -> int:
                with psycopg.connect(postgres_url, autocommit=True) as c:
                    return c.execute("SELECT count(*) FROM session_events WHERE id LIKE 'm%%'").fetchone()[0]

            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                assert committed() == 0
                await asyncio.sleep(0.05)
            holder.commit()
            seqs = [await asyncio.wait_for(f, WAIT_S) for f in appended]
        finally:
            holder.close()
        assert sorted(seqs) == [1, 1, 2, 2, 3, 3]
        assert db.batches - batches == 2, "the held job alone, then the six in one: none cut to wait alone"
        agent = await db.write(agents_q.get_agent, AGENT)
        assert agent["activity"]["at"] == T0 + 105 and agent["activity"]["messageFrom"] == "user"
    finally:
        await db.close()

"""Dense seqs and exactly-once effects under concurrent writers: tasks, threads, databases."""
from __future__ import annotations

import asyncio
import uuid

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import agents, events, idempotency, sessions

from tests.threads import race

ACCOUNT = "z6MkAccount"
PAYLOAD = {"type": "message", "role": "user", "content": "hello"}


def setup_session(conn, now=1):
    agents.create_agent(conn, "a1", ACCOUNT, {"name": "n"}, "/d", now)
    sessions.create_session(conn, "s1", ACCOUNT, "a1", None, now)


def all_seqs(conn, session_id="s1"):
    return [seq for seq, _ in events.event_bodies_after(conn, session_id, 0, 1_000_000)]


async def test_many_tasks_appending_get_dense_unique_seqs(tmp_path):
    db = Database(str(tmp_path / "db.sqlite"))
    await db.start()
    await db.write(setup_session)

    async def writer(n):
        got = []
        for _ in range(n):
            event, _ = await db.write(events.append_event, "s1", PAYLOAD, str(uuid.uuid4()), 2)
            got.append(event["seq"])
        return got

    results = await asyncio.gather(*(writer(40) for _ in range(50)))
    acknowledged = sorted(s for got in results for s in got)
    assert acknowledged == list(range(1, 2001))
    assert all(got == sorted(got) for got in results)  # each task sees its own appends in order
    assert db.read(all_seqs) == list(range(1, 2001))
    assert db.read(events.last_seq, "s1") == 2000
    await db.close()


def test_four_threads_with_their_own_database_on_one_file(tmp_path):
    path = str(tmp_path / "db.sqlite")
    first = Database(path)
    first.start_sync()
    first.write_sync(setup_session)
    first.close_sync()
    per_thread, acknowledged = 150, []

    def run():
        db = Database(path)  # its own writer and reader connections: only SQLite's locks
        db.start_sync()
        for _ in range(per_thread):
            event, _ = db.write_sync(events.append_event, "s1", PAYLOAD, str(uuid.uuid4()), 2)
            acknowledged.append(event["seq"])
        db.close_sync()

    assert race(run, 4) == []
    check = Database(path)
    check.start_sync()
    assert sorted(acknowledged) == list(range(1, 4 * per_thread + 1))
    assert check.read(all_seqs) == list(range(1, 4 * per_thread + 1))
    check.close_sync()


def create_agent_once(conn, client_id, agent_id, now):
    """The handler's pattern: look up the id, else do the effect and record the response."""
    prior = idempotency.idem_get(conn, ACCOUNT, "CreateAgent", client_id)
    if prior is not None:
        return bytes(prior[1]).decode()
    agents.create_agent(conn, agent_id, ACCOUNT, {"name": "once"}, "/d", now)
    idempotency.idem_put(conn, ACCOUNT, "CreateAgent", client_id, b"fp", agent_id.encode(), now)
    return agent_id


def agent_count(conn):
    return conn.execute("SELECT count(*) FROM agents").fetchall()[0][0]


async def test_idempotent_create_has_exactly_one_effect_under_concurrency(tmp_path):
    db = Database(str(tmp_path / "db.sqlite"))
    await db.start()
    responses = await asyncio.gather(
        *(db.write(create_agent_once, "client-1", str(uuid.uuid4()), 5) for _ in range(200)))
    assert len(set(responses)) == 1
    assert db.read(agent_count) == 1
    assert db.read(agents.get_agent, responses[0])["definition"] == {"name": "once"}
    await db.close()


def test_idempotent_create_across_databases_on_one_file(tmp_path):
    path = str(tmp_path / "db.sqlite")
    responses = []

    def run():
        db = Database(path)  # all four race to create the file, too
        db.start_sync()
        for _ in range(20):
            responses.append(db.write_sync(create_agent_once, "client-2", str(uuid.uuid4()), 5))
        db.close_sync()

    assert race(run, 4) == []
    assert len(responses) == 80 and len(set(responses)) == 1
    check = Database(path)
    check.start_sync()
    assert check.read(agent_count) == 1
    check.close_sync()

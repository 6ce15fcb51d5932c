"""Database: group commit on one writer thread, per-job savepoints, reads on the caller's thread."""
from __future__ import annotations

import asyncio
import logging
import threading

import apsw
import pytest

from seed_agents.server.database.sqlite.database import Database, DatabaseClosed


def insert(conn, key, value=None):
    conn.execute("INSERT INTO server_config (key, value) VALUES (?, ?)", (key, value))
    return key


def fail_after_insert(conn, key):
    conn.execute("INSERT INTO server_config (key, value) VALUES (?, 1)", (key,))
    raise ValueError(f"job {key} fails")


def count(conn):
    return conn.execute("SELECT count(*) FROM server_config").fetchall()[0][0]


def keys(conn):
    return [k for (k,) in conn.execute("SELECT key FROM server_config ORDER BY key")]


@pytest.fixture
async def db(tmp_path):
    database = Database(str(tmp_path / "db.sqlite"))
    await database.start()
    yield database
    await database.close()


async def test_write_returns_after_commit_and_read_sees_it(db, tmp_path):
    assert await db.write(insert, "a", 1) == "a"
    other = apsw.Connection(str(tmp_path / "db.sqlite"))  # another connection: it is committed
    assert other.execute("SELECT value FROM server_config WHERE key = 'a'").fetchall() == [(1,)]
    other.close()
    assert db.read(count) == 1
    assert db.reader.execute("SELECT count(*) FROM server_config").fetchall() == [(1,)]


async def test_concurrent_writes_are_group_committed(db):
    await asyncio.gather(*(db.write(insert, f"k{i:03}") for i in range(300)))
    assert db.read(count) == 300
    assert db.jobs == 300
    assert db.batches < 300  # many jobs shared one commit


async def test_failing_job_is_rolled_back_alone(db):
    results = await asyncio.gather(
        db.write(insert, "before"), db.write(fail_after_insert, "bad"), db.write(insert, "after"),
        return_exceptions=True)
    assert results[0] == "before" and results[2] == "after"
    assert isinstance(results[1], ValueError) and "bad" in str(results[1])
    assert db.read(keys) == ["after", "before"]


async def test_constraint_error_reaches_its_caller_only(db):
    await db.write(insert, "dup")
    results = await asyncio.gather(db.write(insert, "dup"), db.write(insert, "fine"),
                                   return_exceptions=True)
    assert isinstance(results[0], apsw.ConstraintError) and results[1] == "fine"


async def test_futures_resolve_in_job_order(db):
    order = []

    async def one(i):
        await db.write(insert, f"o{i:03}")
        order.append(i)

    await asyncio.gather(*(one(i) for i in range(100)))
    assert order == list(range(100))


async def test_write_nowait_runs_and_only_logs_failures(db, caplog):
    with caplog.at_level(logging.ERROR):
        db.write_nowait(insert, "bg")
        db.write_nowait(fail_after_insert, "bgbad")
        await db.write(insert, "sync-point")  # queued after both, so both have run
    assert db.read(keys) == ["bg", "sync-point"]
    assert "fail_after_insert" in caplog.text


async def test_close_commits_queued_writes_then_refuses_new_ones(tmp_path):
    path = str(tmp_path / "db.sqlite")
    db = Database(path)
    await db.start()
    for i in range(500):
        db.write_nowait(insert, f"n{i:03}")
    await db.close()
    with pytest.raises(DatabaseClosed):
        await db.write(insert, "late")
    with pytest.raises(DatabaseClosed):
        db.write_nowait(insert, "late")
    again = Database(path)
    again.start_sync()
    assert again.read(count) == 500
    again.close_sync()


async def test_cancelled_caller_does_not_cancel_the_write(db):
    gate, started = threading.Event(), threading.Event()

    def slow(conn):
        started.set()
        gate.wait(5)
        return insert(conn, "slow")

    task = asyncio.create_task(db.write(slow))
    assert await asyncio.to_thread(started.wait, 5)   # the writer thread is inside the write
    task.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await db.write(insert, "next")
    assert db.read(keys) == ["next", "slow"]


async def test_no_transaction_is_held_between_batches(db, tmp_path):
    await db.write(insert, "x")
    other = apsw.Connection(str(tmp_path / "db.sqlite"))
    other.execute("PRAGMA busy_timeout = 0")
    other.execute("BEGIN IMMEDIATE")  # would be SQLITE_BUSY if the writer kept its transaction
    other.execute("ROLLBACK")
    other.close()


async def test_read_is_one_snapshot(db):
    def read_twice(conn):
        first = count(conn)
        db.write_sync(insert, "during")  # committed by the writer while this read is open
        return first, count(conn)

    assert db.read(read_twice) == (0, 0)
    assert db.read(count) == 1


def test_sync_api_from_other_threads(tmp_path):
    db = Database(str(tmp_path / "db.sqlite"))
    db.start_sync()
    threads = [threading.Thread(target=lambda t=t: [db.write_sync(insert, f"t{t}-{i}") for i in range(50)])
               for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.read(count) == 200
    with pytest.raises(apsw.ConstraintError):
        db.write_sync(insert, "t0-0")
    db.close_sync()


def test_write_sync_inside_a_job_is_refused(tmp_path):
    db = Database(str(tmp_path / "db.sqlite"))
    db.start_sync()
    with pytest.raises(RuntimeError, match="wait for itself"):
        db.write_sync(lambda conn: db.write_sync(insert, "nested"))
    db.close_sync()


async def test_a_lazy_write_rides_with_the_next_commit(db, monkeypatch):
    # A lazy job (nobody waits for it, its loss harmless) waits for a job that must commit now
    # and shares its commit: one batch, one fsync. The window is made long so the test does not
    # depend on how fast this machine schedules the writer thread.
    from seed_agents.server.database.sqlite import database as sqlite_database

    monkeypatch.setattr(sqlite_database, "LAZY_S", 30.0)
    batches = db.batches
    db.write_nowait(insert, "lazy", 1, lazy=True)
    assert await db.write(insert, "now", 2) == "now"
    assert db.read(keys) == ["lazy", "now"]
    assert db.batches == batches + 1 and db.jobs == 2


async def test_a_lazy_write_alone_still_commits(db, monkeypatch):
    from seed_agents.server.database.sqlite import database as sqlite_database
    from tests.waiting import until

    monkeypatch.setattr(sqlite_database, "LAZY_S", 0.05)
    db.write_nowait(insert, "alone", 1, lazy=True)

    async def committed():
        return db.read(keys) == ["alone"]

    await until(committed, 30)
    assert db.batches == 1


async def test_a_lazy_write_waiting_at_close_is_committed_then(tmp_path, monkeypatch):
    from seed_agents.server.database.sqlite import database as sqlite_database

    monkeypatch.setattr(sqlite_database, "LAZY_S", 3600.0)   # the close, not the window, ends its wait
    database = Database(str(tmp_path / "db.sqlite"))
    await database.start()
    database.write_nowait(insert, "pending", 1, lazy=True)
    await asyncio.wait_for(database.close(), 60)
    other = apsw.Connection(str(tmp_path / "db.sqlite"))
    assert other.execute("SELECT key FROM server_config").fetchall() == [("pending",)]
    other.close()

"""Writes sent with the next statement (`PgConn.later`, `port.execute_later`: server/database/
postgres/database.py): a write whose answer nobody reads goes out in the same pipeline as the
job's next statement, a round trip fewer; its error is still its own job's, in a batch and alone,
and it is in the transaction it was made in, in order (docs/storage.md, "Round trips").
"""
from __future__ import annotations

import asyncio

import psycopg
from seed_agents.server.database.port import execute_later

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.server.database.test_storage_pg_group_commit import WAIT_S, hold_writer, make_table, open_db, rows


def later_put(conn, k: int, v: int | None) -> int:
    execute_later(conn, "INSERT INTO gc_rows (k, v) VALUES (?, ?)", (k, v))   # (v NULL: NOT NULL refuses it)
    return k


async def test_a_later_write_is_seen_by_its_jobs_next_read_and_commits_alone(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    try:
        def write_then_read(conn):
            later_put(conn, 20, 5)
            later_put(conn, 21, 6)
            return conn.execute("SELECT v FROM gc_rows WHERE k IN (20, 21) ORDER BY k").fetchall()

        assert [tuple(r) for r in await db.write(write_then_read)] == [(5,), (6,)]
        assert await db.write(later_put, 22, 7) == 22     # the job's only statement: sent with its COMMIT
        got = rows(postgres_url)
        assert {k: got[k] for k in (20, 21, 22)} == {20: 5, 21: 6, 22: 7}
    finally:
        await db.close()


async def test_a_failing_later_write_fails_its_own_job_alone(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    try:
        def then_fail(conn):
            later_put(conn, 30, 1)
            later_put(conn, 31, None)   # refused when it goes out, with the COMMIT
            return "committed"

        try:
            await db.write(then_fail)
        except psycopg.errors.NotNullViolation:
            pass
        else:
            raise AssertionError("a refused later write must fail its job")
        assert await db.write(later_put, 32, 2) == 32     # the next job is not touched by it
        got = rows(postgres_url)
        assert 32 in got and not {30, 31} & set(got)
    finally:
        await db.close()


async def test_in_a_batch_a_failing_later_write_fails_only_its_job(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    try:
        release, first = await hold_writer(db)
        batches_before = db.batches

        def then_fail(conn):
            later_put(conn, 41, 1)
            later_put(conn, 42, None)   # its job ends here: sent before the next job begins
            return "committed"

        futs = [asyncio.ensure_future(db.write(later_put, 40, 1)),
                asyncio.ensure_future(db.write(then_fail)),
                asyncio.ensure_future(db.write(later_put, 43, 3))]
        await asyncio.sleep(0.05)   # all three queued behind the held job
        release.set()
        assert await first == "held"
        results = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), WAIT_S)
        assert results[0] == 40 and results[2] == 43
        assert isinstance(results[1], psycopg.errors.NotNullViolation)
        got = rows(postgres_url)
        assert {k: got[k] for k in (40, 43)} == {40: 1, 43: 3}
        assert not {41, 42} & set(got)                # the failed job left nothing
        assert db.batches - batches_before == 2       # the held job alone, then the three in one
    finally:
        await db.close()


async def test_a_later_write_of_a_job_that_raises_is_never_sent(postgres_url):
    db = await open_db(postgres_url)
    make_table(postgres_url)
    try:
        def write_then_raise(conn):
            later_put(conn, 50, 1)
            raise ValueError("the job's own failure")

        try:
            await db.write(write_then_raise)
        except ValueError:
            pass
        assert await db.write(later_put, 51, 1) == 51
        got = rows(postgres_url)
        assert 51 in got and 50 not in got
    finally:
        await db.close()

"""What only the PostgreSQL driver has: its migrations, servers starting together, connect errors."""
from __future__ import annotations

import asyncio

import psycopg
import pytest

import schema.postgres as pg_schema
from server.storage import parse_storage_url
from server.storage.pg_gate import PgSchemaGateError, PgSchemaMigrationError, PgSchemaTarget
from server.storage.port import Notice, Resync
from server.storage.postgres import PostgresStorage, StorageUnavailable
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)


def tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return {r[0] for r in rows}


def version(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT version FROM schema_version").fetchone()[0]


def target_with(extra_sql: str) -> PgSchemaTarget:
    current = PgSchemaTarget.current()
    return PgSchemaTarget(current.version + 1, current.migrations + ((current.version + 1, extra_sql),))


async def open_store(url: str, **kw) -> PostgresStorage:
    store = PostgresStorage(parse_storage_url(url), **kw)
    await store.open()
    return store


async def test_servers_starting_together_create_the_schema_once(postgres_url):
    stores = await asyncio.gather(*(open_store(postgres_url) for _ in range(3)))
    try:
        assert {s.schema_version for s in stores} == {pg_schema.CURRENT_VERSION}
        assert version(postgres_url) == pg_schema.CURRENT_VERSION
        assert {"schema_version", "sessions", "session_events", "runs", "idempotency",
                "accepted_signatures"} <= tables(postgres_url)
    finally:
        for s in stores:
            await s.close()


async def test_an_older_schema_is_migrated_forward_in_one_transaction(postgres_url):
    await (await open_store(postgres_url)).close()
    store = await open_store(postgres_url, target=target_with("CREATE TABLE extra (x INTEGER)"))
    await store.close()
    assert version(postgres_url) == pg_schema.CURRENT_VERSION + 1 and "extra" in tables(postgres_url)


async def test_a_failing_migration_changes_nothing(postgres_url):
    await (await open_store(postgres_url)).close()
    before = tables(postgres_url)
    broken = target_with("CREATE TABLE extra (x INTEGER); SELECT 1 / 0")
    with pytest.raises(PgSchemaMigrationError) as info:
        await open_store(postgres_url, target=broken)
    assert "division by zero" in str(info.value) and info.value.exit_code == 2
    assert tables(postgres_url) == before and version(postgres_url) == pg_schema.CURRENT_VERSION


async def test_a_schema_version_table_of_another_app_is_refused(postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER, app TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, 'someone-else')")
    with pytest.raises(PgSchemaGateError, match="foreign database"):
        await open_store(postgres_url)
    assert tables(postgres_url) == {"schema_version"}


async def test_a_wrong_password_fails_clearly_without_showing_it(postgres_base_url):
    parts = psycopg.conninfo.conninfo_to_dict(postgres_base_url)
    secret = "wrong-Pa55word-xyz"
    url = (f"postgresql://{parts.get('user', 'postgres')}:{secret}@{parts.get('host', '127.0.0.1')}:"
           f"{parts.get('port', 5432)}/{parts.get('dbname', 'postgres')}")
    with pytest.raises(StorageUnavailable) as info:
        await open_store(url, connect_timeout=3)
    assert secret not in str(info.value) and "***" in str(info.value)
    assert "cannot connect" in str(info.value)


async def test_a_lost_listen_connection_reconnects_and_asks_for_a_resync(postgres_url):
    a, b = await open_store(postgres_url), await open_store(postgres_url)
    try:
        await _lost_listen(a, b, postgres_url)
    finally:
        await a.close()
        await b.close()


async def _lost_listen(a, b, url: str) -> None:
    """A subscriber on server A follows session s1 written through server B, the way the hub
    will: notices say "look", events are read back from the database past the last seq seen."""
    t0 = 1_700_000_000_000

    async def setup(tx):
        await tx.ensure_account("acct", t0)
        await tx.create_agent("a1", "acct", {}, "/tmp/a1", t0)
        await tx.create_session("s1", "acct", "a1", None, t0)

    async def write(text: str) -> int:
        async def work(tx):
            event, _ = await tx.append_event("s1", {"type": "user", "text": text}, f"e-{text}", t0)
            await tx.notify(Notice("sessions/s1", {"seq": event["seq"]}))
            return event["seq"]
        return await b.transaction(work)

    await b.transaction(setup)
    sub = await a.bus.subscribe()
    seen: list[int] = []

    async def follow_until(predicate) -> None:
        while True:
            item = await asyncio.wait_for(sub.get(), 10)
            if isinstance(item, Resync) or item.data.get("seq", 0) > (seen[-1] if seen else 0):
                rows, _ = await a.event_page("s1", seen[-1] if seen else 0, 100, 1 << 20)
                seen.extend(seq for seq, _ in rows)
            if predicate(item):
                return

    await write("one")
    await follow_until(lambda item: seen == [1])
    old_pid = a.bus.listener_pid
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT pg_terminate_backend(%s)", (old_pid,)).fetchone()[0]
    await write("two")  # while A's listener is down: its notice may be lost
    await follow_until(lambda item: isinstance(item, Resync))
    assert a.bus.listener_pid != old_pid and a.bus.reconnects == 1
    assert seen == [1, 2]  # the gap was filled from the database
    await write("three")  # after the reconnect: the notice arrives again
    await follow_until(lambda item: seen == [1, 2, 3])
    assert seen == [1, 2, 3]


# Columns only the PostgreSQL schema has: the queue position and the run lease.
PG_ONLY_COLUMNS = {("runs", "pos"), ("runs", "lease_owner"), ("runs", "lease_expires_at")}


def sqlite_columns() -> set[tuple[str, str]]:
    import apsw

    import schema

    conn = apsw.Connection(":memory:")
    try:
        conn.execute(schema.baseline_sql())
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
        return {(t, row[1]) for t in tables for row in conn.execute(f"PRAGMA table_info({t})")}
    finally:
        conn.close()


async def test_the_postgresql_schema_has_every_table_and_column_of_the_sqlite_schema(postgres_url):
    await (await open_store(postgres_url)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pg = {(t, c) for t, c in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name <> 'schema_version'").fetchall()}
    lite = sqlite_columns()
    missing, extra = sorted(lite - pg), sorted(pg - lite - PG_ONLY_COLUMNS)
    assert not missing and not extra, (
        "the SQLite schema (schema/baseline.sql) and the PostgreSQL one (schema/postgres/) differ: "
        f"add a PostgreSQL migration mirroring the SQLite change. Missing in PostgreSQL: {missing}; "
        f"only in PostgreSQL: {extra}")


async def test_a_version_1_database_is_migrated_to_the_run_trees_with_its_data(postgres_url):
    """Rows written at PostgreSQL version 1 (SQLite version 2's shapes) read back in today's
    shapes, with the backfill SQLite's migration 0004 gives."""
    first = PgSchemaTarget.current()
    await (await open_store(postgres_url, target=PgSchemaTarget(1, first.migrations[:1]))).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO accounts VALUES ('acct', 1)")
        conn.execute("INSERT INTO agents VALUES ('a1', 'acct', %s, '/tmp/a1', 'idle', 1, 1)", (b"\xa0",))
        conn.execute("INSERT INTO sessions (id, account_id, agent_id, title, status, created_at, updated_at)"
                     " VALUES ('s1', 'acct', 'a1', 'Trip', 'streaming', 1, 1)")
        conn.execute("INSERT INTO runs (id, account_id, agent_id, session_id, status, attempt, created_at,"
                     " updated_at, error, lease_owner, lease_expires_at) VALUES"
                     " ('r1', 'acct', 'a1', 's1', 'failed', 1, 10, 20, 'boom', NULL, NULL),"
                     " ('r2', 'acct', 'a1', 's1', 'running', 1, 30, 31, NULL, 'srv-1', 99)")
        conn.execute("INSERT INTO model_providers VALUES ('acct', 'p', %s, 1, 1)", (b"\xa0",))
    store = await open_store(postgres_url)
    try:
        assert store.schema_version == pg_schema.CURRENT_VERSION
        failed, running = await store.get_run("r1"), await store.get_run("r2")
        assert failed == {"id": "r1", "account": "acct", "rootRunId": "r1", "depth": 0, "kind": "agent",
                          "agentId": "a1", "origin": "user", "title": "Trip", "status": "failed",
                          "attempt": 1, "createdAt": 10, "updatedAt": 20, "sessionId": "s1",
                          "startedAt": 10, "finishedAt": 20,
                          "error": {"code": "run-failed", "message": "boom"}}
        assert running["status"] == "running" and "finishedAt" not in running
        assert (await store.get_agent("a1"))["busy"] is True
        assert await store.requeue_expired(100) == ["r2"]  # its lease survived the migration
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            (provider_id,) = conn.execute("SELECT id FROM model_providers").fetchone()
        assert len(provider_id) == 36 and provider_id[14] == "4"  # a UUID v4
    finally:
        await store.close()


async def test_only_claimed_and_running_runs_hold_a_lease(postgres_url):
    store = await open_store(postgres_url)
    await store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO accounts VALUES ('acct', 1)")
        conn.execute("INSERT INTO agents VALUES ('a1', 'acct', %s, '/tmp/a1', 'idle', 1, 1)", (b"\xa0",))
        conn.execute("INSERT INTO sessions (id, account_id, agent_id, status, created_at, updated_at)"
                     " VALUES ('s1', 'acct', 'a1', 'idle', 1, 1)")
        insert = ("INSERT INTO runs (id, account_id, agent_id, session_id, status, created_at, updated_at,"
                  " root_run_id, lease_owner, lease_expires_at) VALUES (%s, 'acct', 'a1', 's1', %s, 1, 1, %s, %s, %s)")
        for status, owner in (("waiting", "srv"), ("queued", "srv"), ("claimed", None), ("running", None)):
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute(insert, (f"bad-{status}", status, f"bad-{status}", owner, None if owner is None else 5))
        conn.execute(insert, ("r1", "waiting", "r1", None, None))
        # One run of a session past the queue at a time: a waiting run keeps the next one out.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert, ("r2", "claimed", "r2", "srv", 5))


async def test_a_claimed_run_whose_server_died_goes_back_to_the_queue(postgres_url):
    """A server that claimed a run and died before starting it: the lease runs out the same way."""
    store = await open_store(postgres_url)
    try:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("INSERT INTO accounts VALUES ('acct', 1)")
            conn.execute("INSERT INTO agents VALUES ('a1', 'acct', %s, '/tmp/a1', 'idle', 1, 1)", (b"\xa0",))
            conn.execute("INSERT INTO runs (id, account_id, agent_id, status, created_at, updated_at,"
                         " root_run_id, lease_owner, lease_expires_at)"
                         " VALUES ('r1', 'acct', 'a1', 'claimed', 1, 1, 'r1', 'srv-1', 1000)")
        assert await store.renew_lease("r1", "srv-1", 1_000, 500)  # held until 1500
        assert not await store.renew_lease("r1", "srv-2", 1_000, 500)
        assert await store.requeue_expired(1_400) == []
        assert await store.requeue_expired(1_501) == ["r1"]
        assert (await store.get_run("r1"))["status"] == "queued"
        again = await store.claim_run("srv-2", 1_000, 2_000)
        assert again["id"] == "r1" and again["attempt"] == 1 and again["leaseOwner"] == "srv-2"
    finally:
        await store.close()

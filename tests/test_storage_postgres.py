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

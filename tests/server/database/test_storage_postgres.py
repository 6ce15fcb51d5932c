"""What only PostgreSQL has: its schema gate and migrations, servers starting together, connect
errors, the idempotency race between two servers that both saw "absent", LISTEN reconnects."""
from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest

import seed_agents.schema.postgres as pg_schema
from seed_agents.server.handlers import idempotency as idem
from seed_agents.server.database import parse_storage_url
from seed_agents.server.database.postgres.database import PgDatabase, StorageUnavailable
from seed_agents.server.database.postgres.gate import PgSchemaGateError, PgSchemaMigrationError, PgSchemaTarget
from seed_agents.server.store import accounts as accounts_q
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import owners as owners_q
from seed_agents.server.store import runs as runs_q
from seed_agents.server.store import sessions as sessions_q

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

T0 = 1_700_000_000_000


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


def target_at(v: int) -> PgSchemaTarget:
    return PgSchemaTarget(v, PgSchemaTarget.current().migrations[:v])


async def open_db(url: str, **kw) -> PgDatabase:
    db = PgDatabase(parse_storage_url(url), **kw)
    await db.start()
    return db


# -- the gate --------------------------------------------------------------------------------
async def test_servers_starting_together_create_the_schema_once(postgres_url):
    dbs = await asyncio.gather(*(open_db(postgres_url) for _ in range(3)))
    try:
        assert {db.schema_version for db in dbs} == {pg_schema.CURRENT_VERSION}
        assert version(postgres_url) == pg_schema.CURRENT_VERSION
        assert {"schema_version", "sessions", "session_events", "runs", "idempotency",
                "accepted_signatures"} <= tables(postgres_url)
    finally:
        for db in dbs:
            await db.close()


async def test_an_older_schema_is_migrated_forward_in_one_transaction(postgres_url):
    await (await open_db(postgres_url)).close()
    db = await open_db(postgres_url, target=target_with("CREATE TABLE extra (x INTEGER)"))
    await db.close()
    assert version(postgres_url) == pg_schema.CURRENT_VERSION + 1 and "extra" in tables(postgres_url)


async def test_a_failing_migration_changes_nothing(postgres_url):
    await (await open_db(postgres_url)).close()
    before = tables(postgres_url)
    broken = target_with("CREATE TABLE extra (x INTEGER); SELECT 1 / 0")
    with pytest.raises(PgSchemaMigrationError) as info:
        await open_db(postgres_url, target=broken)
    assert "division by zero" in str(info.value) and info.value.exit_code == 2
    assert tables(postgres_url) == before and version(postgres_url) == pg_schema.CURRENT_VERSION


async def test_a_schema_version_table_of_another_app_is_refused(postgres_url):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER, app TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, 'someone-else')")
    with pytest.raises(PgSchemaGateError, match="foreign database"):
        await open_db(postgres_url)
    assert tables(postgres_url) == {"schema_version"}


async def test_a_wrong_password_fails_clearly_without_showing_it(postgres_base_url):
    parts = psycopg.conninfo.conninfo_to_dict(postgres_base_url)
    secret = "wrong-Pa55word-xyz"
    url = (f"postgresql://{parts.get('user', 'postgres')}:{secret}@{parts.get('host', '127.0.0.1')}:"
           f"{parts.get('port', 5432)}/{parts.get('dbname', 'postgres')}")
    with pytest.raises(StorageUnavailable) as info:
        await open_db(url, connect_timeout=3)
    assert secret not in str(info.value) and "***" in str(info.value)
    assert "cannot connect" in str(info.value)


# Columns only the PostgreSQL schema has: the queue position and the run lease.
PG_ONLY_COLUMNS = {("runs", "pos"), ("runs", "lease_owner"), ("runs", "lease_expires_at")}
# Full-text search: SQLite's FTS5 table and its shadow tables, PostgreSQL's key and tsvector.
PG_ONLY_COLUMNS |= {("memory_search", "pos"), ("memory_search", "vector")}
SQLITE_ONLY_TABLES = {"memory_search_data", "memory_search_idx", "memory_search_content",
                      "memory_search_docsize", "memory_search_config"}


def sqlite_columns() -> dict[tuple[str, str], str]:
    import apsw

    from seed_agents import schema

    conn = apsw.Connection(":memory:")
    try:
        conn.execute(schema.baseline_sql())
        names = [t for (t,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
                 if t not in SQLITE_ONLY_TABLES]
        return {(t, row[1]): row[2].upper() for t in names for row in conn.execute(f"PRAGMA table_info({t})")}
    finally:
        conn.close()


async def test_the_postgresql_schema_has_every_table_and_column_of_the_sqlite_schema(postgres_url):
    await (await open_db(postgres_url)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pg = {(t, c): kind for t, c, kind in conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name <> 'schema_version'").fetchall()}
    lite = sqlite_columns()
    missing, extra = sorted(set(lite) - set(pg)), sorted(set(pg) - set(lite) - PG_ONLY_COLUMNS)
    assert not missing and not extra, (
        "the SQLite schema (schema/baseline.sql) and the PostgreSQL one (schema/postgres/) differ: "
        f"add a PostgreSQL migration mirroring the SQLite change. Missing in PostgreSQL: {missing}; "
        f"only in PostgreSQL: {extra}")
    # The store's functions are shared, so a value must come back as the same Python type:
    # an SQLite INTEGER is a PostgreSQL integer (never a boolean), a BLOB is bytea.
    expected = {"INTEGER": {"integer", "bigint", "smallint"}, "BLOB": {"bytea"}, "TEXT": {"text", "uuid"}}
    wrong = sorted((col, lite[col], pg[col]) for col in lite
                   if lite[col] in expected and pg[col] not in expected[lite[col]])
    assert not wrong, f"columns whose PostgreSQL type gives the store another Python type: {wrong}"


async def test_a_version_1_database_is_migrated_with_its_data(postgres_url):
    """Rows written at PostgreSQL version 1 (SQLite version 2's shapes) read back through the
    store's own functions in today's shapes, with the backfill SQLite's migration 0004 gives."""
    await (await open_db(postgres_url, target=target_at(1))).close()
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
    db = await open_db(postgres_url)
    try:
        assert db.schema_version == pg_schema.CURRENT_VERSION
        failed, running = db.read(runs_q.get_run, "r1"), db.read(runs_q.get_run, "r2")
        assert failed == {"id": "r1", "account": "acct", "rootRunId": "r1", "depth": 0, "kind": "agent",
                          "agentId": "a1", "origin": "user", "title": "Trip", "status": "failed",
                          "attempt": 1, "createdAt": 10, "updatedAt": 20, "sessionId": "s1",
                          "startedAt": 10, "finishedAt": 20,
                          "error": {"code": "run-failed", "message": "boom"}}
        assert running["status"] == "running" and "finishedAt" not in running
        agent = db.read(agents_q.get_agent, "a1")
        assert agent["busy"] is True and agent["publicRead"] is False
        assert db.read(owners_q.agent_access, "a1") == ("acct", False)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            (provider_id,) = conn.execute("SELECT id FROM model_providers").fetchone()
            lease = conn.execute("SELECT lease_owner, lease_expires_at FROM runs WHERE id = 'r2'").fetchone()
        assert len(provider_id) == 36 and provider_id[14] == "4"   # a UUID v4
        assert lease == ("srv-1", 99)   # the lease survived the migrations
    finally:
        await db.close()


async def test_version_3_makes_public_read_an_integer_keeping_each_agents_value(postgres_url):
    await (await open_db(postgres_url, target=target_at(2))).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO accounts VALUES ('acct', 1)")
        for agent_id, public in (("open", True), ("closed", False)):
            conn.execute("INSERT INTO agents (id, account_id, definition, state_dir, status, created_at,"
                         " updated_at, public_read) VALUES (%s, 'acct', %s, '/tmp/x', 'idle', 1, 1, %s)",
                         (agent_id, b"\xa0", public))
    db = await open_db(postgres_url)
    try:
        assert db.read(owners_q.agent_access, "open") == ("acct", True)
        assert db.read(agents_q.get_agent, "closed")["publicRead"] is False
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            rows = conn.execute("SELECT id, public_read FROM agents ORDER BY id").fetchall()
        assert rows == [("closed", 0), ("open", 1)]
        # New rows take the default, 0, as SQLite's do.
        await db.write(agents_q.create_agent, "new", "acct", {"name": "n"}, "/tmp/n", 2)
        assert db.read(owners_q.agent_access, "new") == ("acct", False)
    finally:
        await db.close()


async def test_only_claimed_and_running_runs_hold_a_lease(postgres_url):
    await (await open_db(postgres_url)).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO accounts VALUES ('acct', 1)")
        conn.execute("INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
                     " VALUES ('a1', 'acct', %s, '/tmp/a1', 'idle', 1, 1)", (b"\xa0",))
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


# -- idempotency across servers --------------------------------------------------------------
async def test_the_loser_of_an_idempotency_race_rereads_the_winners_record(postgres_url):
    """Two servers both find no record for one client id (a barrier holds each effect until
    both have looked), so both run the effect. The record's primary key lets one commit; the
    other's insert of the record fails with a unique violation, PgDatabase runs that job again
    from the start, and this time it finds the winner's record: one effect, one response."""
    a, b = await open_db(postgres_url), await open_db(postgres_url)
    try:
        def seed(conn):
            accounts_q.ensure_account(conn, "acct", T0)
            agents_q.create_agent(conn, "a1", "acct", {"name": "agent"}, "/tmp/a1", T0)
            sessions_q.create_session(conn, "s1", "acct", "a1", None, T0)

        await a.write(seed)
        both_looked = threading.Barrier(2, timeout=10)
        calls: list[str] = []

        def effect(name):
            def run(conn):
                calls.append(name)
                both_looked.wait()   # each writer thread has read "absent" before either goes on
                event, _ = events_q.append_event(conn, "s1", {"type": "message", "role": "user",
                                                              "content": name}, f"ev-{name}", T0)
                return {"seq": event["seq"], "eventId": event["id"]}, [event]
            return run

        (ra, pa), (rb, pb) = await asyncio.gather(
            a.write(idem.once, "acct", "MessageSession", "c1", b"fp", T0, effect("a")),
            b.write(idem.once, "acct", "MessageSession", "c1", b"fp", T0, effect("b")))
        assert sorted(calls) == ["a", "b"]   # both effects ran: the race really happened
        assert ra == rb and ra["seq"] == 1   # and both callers got the winner's response
        assert len(pa) + len(pb) == 1   # only the winner has anything to publish
        assert [e["id"] for e in a.read(events_q.events_after, "s1", 0, 10)] == [ra["eventId"]]
        assert b.read(events_q.last_seq, "s1") == 1   # the loser's append was rolled back
    finally:
        await a.close()
        await b.close()


# -- notices: a lost LISTEN connection -------------------------------------------------------
async def test_a_lost_listen_connection_reconnects_and_asks_for_a_resync(postgres_url):
    """A subscriber on server A follows session s1 written through server B: notices say
    "look", events are read back from the database past the last seq seen."""
    from psycopg_pool import AsyncConnectionPool

    from seed_agents.server.database.notices import Notice, Resync
    from seed_agents.server.database.postgres.bus import PgNoticeBus, channel_for

    url = parse_storage_url(postgres_url)
    a, b = await open_db(postgres_url), await open_db(postgres_url)
    pools = [AsyncConnectionPool(url.dsn(), min_size=1, max_size=2, open=False,
                                 kwargs={"autocommit": True}) for _ in range(2)]
    for pool in pools:
        await pool.open()
    bus_a, bus_b = (PgNoticeBus(url.dsn(), channel_for(db.database, db.schema), pool, display=str(url))
                    for db, pool in zip((a, b), pools))
    try:
        def seed(conn):
            accounts_q.ensure_account(conn, "acct", T0)
            agents_q.create_agent(conn, "a1", "acct", {}, "/tmp/a1", T0)
            sessions_q.create_session(conn, "s1", "acct", "a1", None, T0)

        async def write(text: str) -> int:
            event, _ = await b.write(events_q.append_event, "s1", {"type": "user", "text": text}, f"e-{text}", T0)
            await bus_b.publish(Notice("sessions/s1", {"seq": event["seq"]}))
            return event["seq"]

        await b.write(seed)
        sub = await bus_a.subscribe()
        seen: list[int] = []

        async def follow_until(predicate) -> None:
            while True:
                item = await asyncio.wait_for(sub.get(), 10)
                if isinstance(item, Resync) or item.data.get("seq", 0) > (seen[-1] if seen else 0):
                    rows, _ = a.read(events_q.event_bodies_page, "s1", seen[-1] if seen else 0, 100, 1 << 20)
                    seen.extend(seq for seq, _ in rows)
                if predicate(item):
                    return

        await write("one")
        await follow_until(lambda item: seen == [1])
        old_pid = bus_a.listener_pid
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            assert conn.execute("SELECT pg_terminate_backend(%s)", (old_pid,)).fetchone()[0]
        await write("two")   # while A's listener is down: its notice may be lost
        await follow_until(lambda item: isinstance(item, Resync))
        assert bus_a.listener_pid != old_pid and bus_a.reconnects == 1
        assert seen == [1, 2]   # the gap was filled from the database
        await write("three")   # after the reconnect: the notice arrives again
        await follow_until(lambda item: seen == [1, 2, 3])
        assert seen == [1, 2, 3]
    finally:
        await bus_a.close()
        await bus_b.close()
        for pool in pools:
            await pool.close()
        await a.close()
        await b.close()


# -- lost connections ------------------------------------------------------------------------
async def test_a_lost_connection_is_replaced_a_read_rerun_and_a_write_reported(postgres_url):
    """A database restart or a network cut: a read simply runs again on a new connection; a
    write job whose connection broke is reported failed (its COMMIT may or may not have landed,
    so it is never run twice), and the next job runs on a new connection."""
    db = await open_db(postgres_url)
    try:
        await db.write(accounts_q.ensure_account, "acct", T0)
        writer_pid = await db.write(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        reader_pid = db.read(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for pid in (writer_pid, reader_pid):
                assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        assert db.read(lambda conn: conn.execute("SELECT count(*) FROM accounts").fetchone()[0]) == 1
        with pytest.raises(psycopg.OperationalError):
            await db.write(accounts_q.ensure_account, "lost", T0)
        await db.write(accounts_q.ensure_account, "next", T0)
        ids = db.read(lambda conn: [a for (a,) in conn.execute("SELECT id FROM accounts ORDER BY id")])
        assert ids == ["acct", "next"]
    finally:
        await db.close()


# -- a read's COMMIT is not waited for -------------------------------------------------------
async def test_a_read_ends_its_snapshot_without_waiting_and_the_next_read_sees_new_commits(postgres_url):
    """A read's snapshot transaction is committed without waiting for the answer (PgConn.end,
    wait=False): the database still ends it at once (no snapshot left open on an idle reader),
    and the next read on the connection takes a new snapshot, after reading that answer."""
    db = await open_db(postgres_url)
    try:
        await db.write(accounts_q.ensure_account, "a1", T0)
        count = "SELECT count(*) FROM accounts"
        reader_pid = db.read(lambda conn: conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert db.read(lambda conn: conn.execute(count).fetchone()[0]) == 1
        with psycopg.connect(postgres_url, autocommit=True) as other:
            state = None
            for _ in range(200):   # the COMMIT is on its way: wait for it, bounded
                state = other.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                                      (reader_pid,)).fetchone()[0]
                if state == "idle":
                    break
                await asyncio.sleep(0.01)
            assert state == "idle"   # not "idle in transaction": no snapshot held
            other.execute("INSERT INTO accounts (id, created_at) VALUES ('a2', %s)", (T0,))
        # Many reads in a row, each on a fresh snapshot, with errors between them.
        for i in range(20):
            assert db.read(lambda conn: conn.execute(count).fetchone()[0]) == 2
            with pytest.raises(psycopg.errors.UndefinedTable):
                db.read(lambda conn: conn.execute("SELECT * FROM no_such_table").fetchall())
            assert await db.aread(lambda conn: conn.execute(count).fetchone()[0]) == 2
    finally:
        await db.close()


# -- the loop's own connections (aread_each, replay claims) ----------------------------------
async def test_reads_on_the_loops_connection_are_read_only_snapshots_in_flight_together(postgres_url):
    """`aread_each`: each call's statements in one read-only snapshot (its own implicit
    transaction), many calls in flight at once on the one connection, answered each its own; an
    error fails its call alone and leaves nothing open for the next."""
    db = await open_db(postgres_url)
    try:
        for i in range(5):
            await db.write(accounts_q.ensure_account, f"a{i}", T0)

        def reads(i: int):
            return [("SELECT id FROM accounts WHERE id = ?", (f"a{i % 5}",)), ("SELECT count(*) FROM accounts", ()),
                    ("SELECT now() = statement_timestamp() OR true, txid_current_if_assigned() IS NULL", ())]
        answers = await asyncio.gather(*(db.aread_each(reads, i) for i in range(60)))
        assert [a[0] for a in answers] == [[(f"a{i % 5}",)] for i in range(60)]
        assert all(a[1] == [(5,)] and a[2] == [(True, True)] for a in answers)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await db.aread_each(lambda: [("INSERT INTO accounts (id, created_at) VALUES ('x', 1)", ())])
        with pytest.raises(psycopg.errors.UndefinedTable):
            await db.aread_each(lambda: [("SELECT 1", ()), ("SELECT * FROM no_such_table", ())])
        assert await db.aread_each(lambda: [("SELECT count(*) FROM accounts", ())]) == [[(5,)]]
        # One snapshot per call: a write committed between two calls is seen by the second only.
        first = await db.aread_each(lambda: [("SELECT count(*) FROM accounts", ()), ("SELECT pg_sleep(0)", ()),
                                             ("SELECT count(*) FROM accounts", ())])
        assert first[0] == first[2] == [(5,)]
        await db.write(accounts_q.ensure_account, "a5", T0)
        assert await db.aread_each(lambda: [("SELECT count(*) FROM accounts", ())]) == [[(6,)]]
    finally:
        await db.close()


async def test_a_loop_connection_closed_twice_leaves_its_old_socket_numbers_new_owner_watched(postgres_url):
    """A lost loop connection closes itself and is closed again when replaced (and at shutdown);
    by then its socket's number may belong to another socket the loop watches (the other loop
    connection's, reconnected meanwhile): the second close must not stop watching that one."""
    import os
    import socket

    db = await open_db(postgres_url)
    a, b = socket.socketpair()
    try:
        await db.aread_each(lambda: [("SELECT 1", ())])
        old = db._loop_reader
        fd = old.fd
        old.close()                  # as `_break` does when the connection is lost
        os.dup2(a.fileno(), fd)      # the number taken by another socket, watched by the loop
        loop = asyncio.get_running_loop()
        seen = asyncio.Event()
        loop.add_reader(fd, seen.set)
        old.close()                  # as the replacement (or shutdown) does
        b.send(b"x")
        await asyncio.wait_for(seen.wait(), 5)
        assert loop.remove_reader(fd)
        os.close(fd)
    finally:
        a.close()
        b.close()
        await db.close()


async def test_the_loops_connections_lost_are_replaced(postgres_url):
    """A database restart or a network cut under the loop's connections: a batched read runs
    again on a new connection; a claim in flight is refused or answered rightly (never a claim
    the database did not record), and the next claims run on a new connection."""
    db = await open_db(postgres_url)
    try:
        assert await db.claim_signature(b"\x01" * 64, T0 + 60_000, T0, durable=False) is True
        assert await db.claim_signature(b"\x02" * 64, T0 + 60_000, T0, durable=True) is True
        reader_pid = (await db.aread_each(lambda: [("SELECT pg_backend_pid()", ())]))[0][0][0]
        pids = [reader_pid] + [c.conn.pg.backend_pid for c in db._claimers.values()]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for pid in pids:
                assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
        assert await db.aread_each(lambda: [("SELECT count(*) FROM accepted_signatures", ())]) == [[(2,)]]
        for durable in (False, True):
            sig = bytes([3 + durable]) * 64
            try:
                first = await db.claim_signature(sig, T0 + 60_000, T0, durable=durable)
            except psycopg.OperationalError:
                first = None   # refused: the client signs again
            again = await db.claim_signature(sig, T0 + 60_000, T0, durable=durable)
            assert (first, again) in ((True, False), (None, True))
            assert await db.claim_signature(b"\x01" * 64, T0 + 60_000, T0, durable=durable) is False
        assert (await db.aread_each(lambda: [("SELECT count(*) FROM accepted_signatures", ())]))[0] == [(4,)]
    finally:
        await db.close()

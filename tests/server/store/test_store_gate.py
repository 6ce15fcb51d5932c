"""The schema gate: create, migrate, or refuse and leave the file exactly as it was."""
from __future__ import annotations

import os

import apsw
import pytest

from seed_agents import schema
from seed_agents.server.database.sqlite.gate import (
    SchemaGateError,
    SchemaMigrationError,
    SchemaTarget,
    open_database,
    open_reader,
)

from tests.threads import race


def make_v1(path) -> None:
    """A database as version 1 of the server left it (rollback journal, user_version 1)."""
    conn = apsw.Connection(str(path))
    conn.execute(schema.migrations()[0][1])
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO agents VALUES ('a1', 'acct', x'a0', '/tmp/a1', 'idle', 1, 2)")
    conn.execute("INSERT INTO sessions VALUES ('s1', 'acct', 'a1', NULL, 'idle', 0, 1, 2)")
    conn.execute("INSERT INTO runs VALUES ('r1', 'acct', 'a1', 's1', NULL, 'failed', 1, 1, 2)")
    conn.close()


def files_of(path) -> dict:
    """Bytes of the database and any sidecar files, to prove a refusal touched nothing."""
    out = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = f"{path}{suffix}"
        if os.path.exists(p):
            with open(p, "rb") as f:
                out[suffix] = f.read()
    return out


def user_version(path) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("PRAGMA user_version").fetchall()[0][0]
    finally:
        conn.close()


def test_fresh_database_is_created_at_current_version_with_pragmas(tmp_path):
    path = tmp_path / "deep" / "dir" / "agents.sqlite"
    conn = open_database(str(path))
    try:
        pragma = lambda name: conn.execute(f"PRAGMA {name}").fetchall()[0][0]  # noqa: E731
        assert pragma("user_version") == schema.CURRENT_VERSION
        assert pragma("journal_mode") == "wal"
        assert pragma("synchronous") == 2  # FULL
        assert pragma("foreign_keys") == 1
        assert pragma("busy_timeout") == 5000
        with pytest.raises(apsw.ConstraintError):  # foreign keys are enforced
            conn.execute("INSERT INTO sessions (id, account_id, agent_id, title, status, last_seq, created_at,"
                         " updated_at) VALUES ('s', 'acct', 'no-such-agent', NULL, 'idle', 0, 1, 1)")
    finally:
        conn.close()
    assert user_version(path) == schema.CURRENT_VERSION


def test_reopening_a_current_database_changes_nothing(tmp_path):
    path = tmp_path / "a.sqlite"
    open_database(str(path)).close()
    before = files_of(path)
    open_database(str(path)).close()
    assert files_of(path) == before


def test_empty_file_is_treated_as_new(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    open_database(str(path)).close()
    assert user_version(path) == schema.CURRENT_VERSION


def test_version_1_file_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / "v1.sqlite"
    make_v1(path)
    conn = open_database(str(path))
    try:
        assert conn.execute("PRAGMA user_version").fetchall()[0][0] == schema.CURRENT_VERSION
        assert conn.execute("SELECT id, status, error FROM runs").fetchall() == [("r1", "failed", None)]
        conn.execute("INSERT INTO accepted_signatures VALUES (x'00', 5)")
        assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    finally:
        conn.close()


def test_failing_migration_leaves_file_byte_identical(tmp_path):
    path = tmp_path / "v1.sqlite"
    make_v1(path)
    before = files_of(path)
    v1_sql = schema.migrations()[0][1]
    # Migration 2 does real work before it fails, so the rollback has something to undo.
    bad = SchemaTarget(3, "unused", ((1, v1_sql),
                                     (2, "ALTER TABLE runs ADD COLUMN error TEXT; CREATE TABLE t (x);"),
                                     (3, "UPDATE runs SET error = 'x'; INSERT INTO no_such_table VALUES (1);")))
    with pytest.raises(SchemaMigrationError) as info:
        open_database(str(path), target=bad)
    assert info.value.found == 1 and info.value.expected == 3
    assert "version 3" in str(info.value) and "no_such_table" in str(info.value)
    assert files_of(path) == before
    assert user_version(path) == 1


@pytest.mark.parametrize("version", [schema.CURRENT_VERSION + 1, 99, -1])
def test_newer_or_unknown_version_is_refused_untouched(tmp_path, version):
    path = tmp_path / "newer.sqlite"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE x (y); PRAGMA journal_mode = WAL;")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    before = files_of(path)
    with pytest.raises(SchemaGateError) as info:
        open_database(str(path))
    err = info.value
    assert (err.found, err.expected, err.exit_code) == (version, schema.CURRENT_VERSION, 2)
    assert f"found: {version}" in str(err) and f"expects: {schema.CURRENT_VERSION}" in str(err)
    assert files_of(path) == before


def test_garbage_file_is_refused_untouched(tmp_path):
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(os.urandom(8192))
    before = files_of(path)
    with pytest.raises(SchemaGateError) as info:
        open_database(str(path))
    assert info.value.found is None
    assert "unreadable" in str(info.value) and f"expects: {schema.CURRENT_VERSION}" in str(info.value)
    assert files_of(path) == before


def test_corrupt_file_with_sqlite_header_is_refused_untouched(tmp_path):
    path = tmp_path / "corrupt.sqlite"
    open_database(str(path)).close()
    data = bytearray(path.read_bytes())
    data[100:] = os.urandom(len(data) - 100)  # keep the header, wreck every page
    data[16:18] = b"\x00\x03"                  # and an impossible page size
    path.write_bytes(bytes(data))
    before = files_of(path)
    with pytest.raises(SchemaGateError):
        open_database(str(path))
    assert files_of(path) == before


def test_legacy_database_with_tables_and_version_0_is_refused_untouched(tmp_path):
    path = tmp_path / "legacy.sqlite"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE agents (id TEXT PRIMARY KEY, name TEXT); INSERT INTO agents VALUES ('a', 'b');")
    conn.close()
    before = files_of(path)
    with pytest.raises(SchemaGateError) as info:
        open_database(str(path))
    assert info.value.found == 0 and "legacy" in str(info.value)
    assert f"expects: {schema.CURRENT_VERSION}" in str(info.value)
    assert files_of(path) == before


def test_reader_connection_refuses_writes(tmp_path):
    path = tmp_path / "r.sqlite"
    writer = open_database(str(path))
    reader = open_reader(str(path))
    try:
        with pytest.raises(apsw.ReadOnlyError):
            reader.execute("INSERT INTO accounts VALUES ('a', 1)")
    finally:
        reader.close()
        writer.close()


def test_a_statement_stays_prepared_across_hundreds_of_others(tmp_path):
    # apsw's cache is a ring: a statement is prepared again once as many other executions as
    # the ring has slots ran since it last did. A c8 turn mix re-prepared 2.4 statements a turn
    # with apsw's default 100 (docs/performance.md, "The statement cache").
    path = str(tmp_path / "c.sqlite")
    for conn in (open_database(path), open_reader(path)):
        try:
            statements = [f"SELECT id FROM accounts WHERE id = ? AND {i} = {i}" for i in range(300)]
            before = conn.cache_stats()["misses"]
            for _ in range(3):
                for sql in statements:
                    conn.execute(sql, ("a",)).fetchall()
            assert conn.cache_stats()["misses"] - before == len(statements)   # prepared once each
        finally:
            conn.close()


def _leave_hot_wal(path, sql: str) -> None:
    """Run `sql` in WAL mode and close without checkpointing, as a crashed process would."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    conn.execute(sql)
    conn.close()
    assert os.path.getsize(f"{path}-wal") > 0


@pytest.mark.parametrize("case", ["legacy", "newer-in-wal"])
def test_refusal_with_a_left_over_wal_does_not_checkpoint_it(tmp_path, case):
    path = tmp_path / "hot.sqlite"
    if case == "legacy":
        _leave_hot_wal(path, "CREATE TABLE old (x); INSERT INTO old VALUES (1);")
    else:  # the header says current; only the WAL knows a newer build migrated it further
        open_database(str(path)).close()
        _leave_hot_wal(path, f"CREATE TABLE newer (x); PRAGMA user_version = {schema.CURRENT_VERSION + 1};")
    before = files_of(path)
    with pytest.raises(SchemaGateError) as info:
        open_database(str(path))
    assert info.value.found == (0 if case == "legacy" else schema.CURRENT_VERSION + 1)
    after = files_of(path)
    assert after[""] == before[""] and after["-wal"] == before["-wal"]


def test_connections_racing_to_create_the_file_all_succeed(tmp_path):
    # Regression: a racer saw tables before the version (two snapshots) and called the file
    # legacy, or got BUSY switching to WAL while another racer read.
    for attempt in range(25):
        path = str(tmp_path / f"race{attempt}.sqlite")

        def open_both():
            conn = open_database(path)
            open_reader(path).close()
            conn.close()

        assert race(open_both, 6) == []
        assert user_version(path) == schema.CURRENT_VERSION

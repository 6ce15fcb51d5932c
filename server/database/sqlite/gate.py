"""The schema gate: a database file is used only at the schema version this build knows.

`open_database(path)` creates a missing file at the current version, migrates an older one
forward (all migrations in one transaction, each in its own savepoint: all or nothing), and
refuses anything else (newer or unknown version, not SQLite, or a "legacy" file with tables but
user_version 0) with SchemaGateError, leaving the file byte-for-byte as it was. The server turns
that error into exit status 2 before it listens (CONTRACT section 7).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import apsw

from seed_agents import schema

from ..errors import SchemaGateError, SchemaMigrationError
from ..filemodes import create_private_file, make_private_dir
from ..port import Traits

SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_SIZE = 100
_USER_VERSION_OFFSET = 60  # big-endian signed 32-bit in the file header
BUSY_TIMEOUT_MS = 5000
# Cap the WAL file left behind after a checkpoint, so one burst does not keep a huge file.
JOURNAL_SIZE_LIMIT = 64 << 20
# A write job's savepoint journal (the pages it changes, kept to roll the job back alone) stays
# in memory up to this size, where SQLite's default spills it to a temp file past 64 KiB; once
# spilled, every page each later job of the batch changes costs two write calls to that file.
# Not more: when the in-memory journal spills, SQLite writes its one chunk (as large as this
# setting) to the file in one call, and the unix VFS masks a write's length to 17 bits
# (os_unix.c, seekAndWriteFd), so a journal of 128 KiB or more would be cut and the job fail
# with SQLITE_FULL (tests/server/database/test_storage_conformance.py, the large
# job in a batch).
STATEMENT_JOURNAL_SPILL = (1 << 17) - 1


# apsw's statement cache is a ring of this many slots: a statement is taken out while it runs
# and put back at the ring's next slot, so it stays prepared only if it runs again before that
# many other executions. The default 100 is about three c8 turns of the writer's statements, and
# at c8 it re-prepared 2.4 statements a turn (about 100k instructions each); at 512 it prepares
# none once warm. A slot holds one prepared statement (1-3 KB), whichever of the store's few
# hundred statements ran last (docs/performance.md, "The statement cache").
STATEMENT_CACHE_SIZE = 512


def _configure_sqlite() -> bool:
    """Set the process-wide SQLite options above: possible only while no connection is open
    (apsw refuses otherwise, and then the defaults stay: slower, not wrong)."""
    try:
        apsw.shutdown()
    except apsw.MisuseError:
        return False
    apsw.config(apsw.SQLITE_CONFIG_STMTJRNL_SPILL, STATEMENT_JOURNAL_SPILL)
    apsw.initialize()
    return True


STATEMENT_JOURNAL_CONFIGURED = _configure_sqlite()


# How SQLite differs where a query must know it (server/database/port.py): one process owns the
# file, so runs need no leases and its one writer already serializes (no row locks).
SQLITE = Traits(name="sqlite", run_leases=False, lock_rows="", skip_locked="", like_ci="LIKE",
                text_search="fts5")


class SqliteConn(apsw.Connection):
    """apsw's connection, carrying the adapter's traits for the store's queries."""

    traits = SQLITE
    # Rows are written at once: the one writer orders every transaction on the file, so no row
    # is hot between servers (PostgreSQL's writer defers some: server/database/end_writes.py).
    end_writes = None


@dataclass(frozen=True)
class SchemaTarget:
    """What the gate brings a file to; tests pass their own to exercise failures."""

    version: int
    baseline: str
    migrations: tuple[tuple[int, str], ...]

    @classmethod
    def current(cls) -> SchemaTarget:
        return cls(schema.CURRENT_VERSION, schema.baseline_sql(), tuple(schema.migrations()))


def open_database(path: str, *, target: SchemaTarget | None = None) -> apsw.Connection:
    """Open `path` read-write at the target schema version, or raise SchemaGateError."""
    target = target or SchemaTarget.current()
    make_private_dir(os.path.dirname(os.path.abspath(path)))
    _check_header(path, target)
    if path != ":memory:":
        create_private_file(path)  # 0600: SQLite gives -wal and -shm the same mode
    hot_wal = os.path.exists(path + "-wal") and os.path.getsize(path + "-wal") > 0
    flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        conn = SqliteConn(path, flags=flags, statementcachesize=STATEMENT_CACHE_SIZE)
    except apsw.Error as exc:
        raise SchemaGateError(path, None, target.version, f"cannot open: {exc}") from exc
    try:
        if hot_wal:
            # Until the file is accepted, closing must not checkpoint a left-over WAL into it
            # (that would change a file we refuse). Without one, a normal close writes nothing
            # to the file and removes the -wal/-shm files SQLite made while looking.
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _bring_to_target(conn, path, target)
        conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0)
        configure(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def open_reader(path: str, *, target: SchemaTarget | None = None) -> apsw.Connection:
    """A second connection to a file the gate already accepted; it refuses to write."""
    target = target or SchemaTarget.current()
    conn = SqliteConn(path, flags=apsw.SQLITE_OPEN_READWRITE, statementcachesize=STATEMENT_CACHE_SIZE)
    try:
        configure(conn)
        conn.execute("PRAGMA query_only = ON")
        found = _user_version(conn)
        if found != target.version:  # changed under us since the gate ran
            raise SchemaGateError(path, found, target.version, "schema version changed after open")
    except BaseException:
        conn.close()
        raise
    return conn


def configure(conn: apsw.Connection) -> None:
    """Per-connection settings every store connection runs with.

    WAL lets readers work while the writer commits. synchronous=FULL fsyncs the WAL at every
    commit: a write is acknowledged only after COMMIT, and an acknowledged write must survive
    power loss (NORMAL only survives a process crash). The writer group-commits, so one fsync
    covers a whole batch of writes.
    """
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    _ensure_wal(conn)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")


def _ensure_wal(conn: apsw.Connection) -> None:
    # Switching to WAL needs an exclusive lock and SQLite answers BUSY at once, without the busy
    # handler, while another connection reads; so ask first (usually it is WAL already) and
    # retry the switch for as long as busy_timeout would have waited.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchall()[0][0]
            if str(mode).lower() != "wal":
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchall()[0][0]
            if str(mode).lower() != "wal":
                raise apsw.Error(f"could not switch the database to WAL (journal_mode is {mode})")
            return
        except apsw.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _check_header(path: str, target: SchemaTarget) -> None:
    """Refuse from the raw header when possible, before SQLite touches the file at all."""
    try:
        with open(path, "rb") as f:
            header = f.read(_HEADER_SIZE)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SchemaGateError(path, None, target.version, f"cannot read: {exc}") from exc
    if not header:
        return  # an empty file is an empty database (or a WAL-only one: SQLite will tell)
    if len(header) < _HEADER_SIZE or not header.startswith(SQLITE_MAGIC):
        raise SchemaGateError(path, None, target.version, "not an SQLite database")
    found = int.from_bytes(header[_USER_VERSION_OFFSET:_USER_VERSION_OFFSET + 4], "big", signed=True)
    if found < 0 or found > target.version:
        raise SchemaGateError(path, found, target.version, _unknown_reason(found, target))


def _unknown_reason(found: int, target: SchemaTarget) -> str:
    if found > target.version:
        return "schema is newer than this build; upgrade the server or restore a backup"
    return "unknown schema version"


def _user_version(conn: apsw.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchall()[0][0]


def _inspect(conn: apsw.Connection, path: str, target: SchemaTarget) -> tuple[int, bool]:
    try:
        # One statement, so both come from one snapshot even while another process creates it.
        version, objects = conn.execute(
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT count(*) FROM sqlite_schema)").fetchall()[0]
        has_objects = objects > 0
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise SchemaGateError(path, None, target.version, f"not a readable SQLite database: {exc}") from exc
    return version, has_objects


def _plan(conn: apsw.Connection, path: str, target: SchemaTarget) -> int | None:
    """The version to start from (0 = fresh), or None when the file is already at target."""
    version, has_objects = _inspect(conn, path, target)
    if version == target.version:
        return None
    if version == 0:
        if has_objects:
            raise SchemaGateError(path, 0, target.version, _legacy_reason(conn, path))
        return 0
    have = {v for v, _ in target.migrations}
    if 0 < version < target.version and have >= set(range(version + 1, target.version + 1)):
        return version
    raise SchemaGateError(path, version, target.version, _unknown_reason(version, target))


def _legacy_reason(conn: apsw.Connection, path: str) -> str:
    """Why a file with tables and no version is refused: the reference server's own database
    (its `session_events` keeps `event_cbor`) is named as such, with the command that moves in."""
    reference = conn.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'session_events'"
                             " AND sql LIKE '%event_cbor%'").fetchall()[0][0]
    if reference:
        folder = os.path.dirname(os.path.abspath(path)) or "."
        return ("a reference (TypeScript) Seed agents server's database, which this server does not run on; "
                f"bring its data into a new data dir with `seed-agents import {folder} --data-dir NEW_DIR`, "
                "which only reads it")
    return "legacy database: it has tables but no schema version"


def _bring_to_target(conn: apsw.Connection, path: str, target: SchemaTarget) -> None:
    if _plan(conn, path, target) is None:
        return
    # Migrations may rebuild tables, which needs foreign keys off; they are checked once at the
    # end instead (foreign_keys cannot change inside a transaction).
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN IMMEDIATE")
    try:
        start = _plan(conn, path, target)  # again under the write lock: another process may have won
        if start == 0:
            _apply(conn, path, target, 0, target.version, target.baseline)
        elif start is not None:
            for version, sql in target.migrations:
                if version > start:
                    _apply(conn, path, target, start, version, sql)
        if conn.execute("PRAGMA foreign_key_check").fetchall():
            raise SchemaMigrationError(path, start, target.version,
                                       "migration left rows that break foreign keys")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _apply(conn: apsw.Connection, path: str, target: SchemaTarget, start: int, version: int,
           sql: str) -> None:
    conn.execute("SAVEPOINT migration")
    try:
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version = {int(version)}")
        conn.execute("RELEASE migration")
    except apsw.Error as exc:
        raise SchemaMigrationError(path, start, target.version,
                                   f"migration to version {version} failed: {exc}") from exc

"""PgDatabase: the PostgreSQL adapter's façade (the storage port: server/database/port.py).

The server talks to its store in one way whatever the backend: `read(fn, *args)`,
`aread`, `write`, `write_nowait`, `write_sync`, where `fn(conn, *args)` is a function of
`seed_agents.server.store`. `seed_agents.server.database.sqlite.database.Database` runs them on SQLite; this class runs the same
functions on PostgreSQL through psycopg 3, with `PgConn` presenting a psycopg connection the way
the store uses apsw's (`execute`, `executemany`, `changes`) and `seed_agents.server.database.postgres.dialect`
rewriting the few SQLite spellings.

- `read`: on the caller's thread (the event loop's), on one reader connection, in one
  REPEATABLE READ READ ONLY transaction, so `fn` sees one snapshot as it does on SQLite. It is a
  round trip to the database that the loop waits for (a loopback one on a LAN is ~0.1-0.3 ms):
  the price of keeping the store's synchronous, await-free reads, on which the subscription
  and grant invariants rest. A handler's `aread` runs on reader threads (a round trip the loop
  need not wait for).
- writes: one writer thread group-commits the jobs in the order they were submitted: a batch
  in one READ COMMITTED transaction, each job in a savepoint, and a batch never waits for a row
  lock past `BATCH_LOCK_WAIT_MS`, so another server's batch cannot deadlock with it
  (`_run_batch`; docs/storage.md "Group commit on PostgreSQL"). A job that fails with a
  serialization failure, a deadlock or a unique violation (two servers racing on an
  idempotency key) is run again from the start, up to `RETRIES` times: the second run sees the
  winner's commit.
- What must hold across servers is held by the database: the per-session seq counter row, the
  unique keys of idempotency records and replay signatures (`claim_signature`), and the run
  leases (seed_agents.server.store.leases, for a backend whose traits say `run_leases`).
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import queue
import select
import threading
from typing import Any, Callable

import psycopg
import psycopg.adapt
from psycopg import errors as pg_errors
from psycopg import pq

from ..end_writes import EndWrites
from ..errors import StorageError, UnstorableText
from ..port import Traits
from ..url import StorageURL, scrub
from ..workers import STOP as _STOP
from ..workers import DatabaseClosed, Job, ReaderThreads, WriteQueue, deliver
from .dialect import to_postgres
from .gate import PgSchemaTarget, pass_gate

log = logging.getLogger(__name__)

RETRIES = 4
# Prepared statements: psycopg prepares a statement at its second use on a connection (one-off
# statements are not kept) and keeps the most recent PREPARED_MAX (the store has a few hundred).
PREPARE_THRESHOLD = 1
PREPARED_MAX = 512
# How PostgreSQL differs where a query must know it (server/database/port.py): several servers
# take runs (leases), lock the rows they move, and skip those another server holds.
POSTGRES = Traits(name="postgresql", run_leases=True, lock_rows=" FOR UPDATE",
                  skip_locked=" FOR UPDATE SKIP LOCKED", like_ci="ILIKE", text_search="tsvector",
                  batched_reads=True, lock_to_update=" FOR NO KEY UPDATE")
# Run again from the start: another transaction won a race this one can now see.
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.UniqueViolation)
# Group commit (PgDatabase._run_batch): at most this many jobs share a transaction, each in a
# savepoint (a subtransaction: past 64 with an id each, PostgreSQL's snapshots of every session
# overflow their subtransaction cache and slow down), and a batch's transaction waits at most
# this long for a row lock before it stops there and commits what it has.
BATCH_LIMIT = 48
BATCH_LOCK_WAIT_MS = 20
# A job that meets one of these in a batch is rolled back to its savepoint and runs alone next.
_CUT_ERRORS = (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
_CUT = object()   # a job's value while it waits to run alone
# What a transaction, a batch's first job and its next jobs send before their first statement
# (PgConn.begin: in the same round trip as that statement).
_BEGIN_WRITE = ("BEGIN ISOLATION LEVEL READ COMMITTED",)
_BEGIN_READ = ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",)
_FIRST_JOB = (*_BEGIN_WRITE, f"SET LOCAL lock_timeout = '{BATCH_LOCK_WAIT_MS}ms'", "SAVEPOINT job")
_NEXT_JOB = ("RELEASE SAVEPOINT job", "SAVEPOINT job")
# A batch's end writes (an agent's row: server/database/end_writes.py) wait for their rows without
# the jobs' bound: what holds such a row is another transaction's end writes and COMMIT, or, in
# a real cycle, a lone job that PostgreSQL's deadlock detection fails (docs/storage.md).
_END_WRITES = ("SET LOCAL lock_timeout = 0",)
_ROLLBACK_TO = "ROLLBACK TO SAVEPOINT job"


class StorageUnavailable(StorageError):
    """The database cannot be reached; the message names the redacted URL only."""


def _reason(exc: Exception, url: StorageURL) -> str:
    """libpq's first line (its hints follow on others), with no password in it."""
    text = str(exc).strip().splitlines()
    return scrub(text[0].strip() if text else type(exc).__name__, url)


def _param(value: Any) -> Any:
    # SQLite stores a bool as 0/1 and gives back ints; the shared schema uses integers for flags.
    if value is True or value is False:
        return int(value)
    if type(value) is str and "\x00" in value:
        raise UnstorableText("text with a NUL character (U+0000) cannot be stored; remove it")
    if type(value) is memoryview:
        return bytes(value)
    return value


class _Rows:
    """What apsw's cursor gives the store: iteration, fetchone, fetchall (over rows loaded at
    once: the connection runs its next statement before this result may be looked at)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list) -> None:
        self._rows = rows

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return self._rows

    def __iter__(self):
        return iter(self._rows)


_NO_ROWS = _Rows([])
_AUTO = psycopg.adapt.PyFormat.AUTO
_BINARY = pq.Format.BINARY
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_FATAL = pq.ExecStatus.FATAL_ERROR
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_IDLE = pq.TransactionStatus.IDLE


class PgConn:
    """A psycopg connection as the store functions use apsw's.

    Statements go through libpq itself (psycopg's `pq` binding) in pipeline mode, with
    psycopg's C `Transformer` to bind the parameters and load the rows: psycopg's cursor spends
    some 30 us of Python on each statement, this path a few (docs/performance.md, "One round
    trip per GetSession"). Parameters are bound by the server (the dialect writes `$N`); a
    statement is prepared at its second use on the connection, its Parse sent with that
    execution (at most PREPARED_MAX kept); results come in binary. `begin(*commands)` opens a
    transaction (or a savepoint) lazily: the commands are sent with the first statement, in
    one round trip, and a job or read that runs no statement sends none of them; `end()`
    commits what was opened. `fetch_each` sends several statements in one round trip."""

    __slots__ = ("raw", "_pg", "_tx", "_changes", "_prefix", "_unread", "_seen", "_names", "_parsed", "_made", "_encoding",
                 "end_writes", "_later", "later_failed")

    traits = POSTGRES

    def __init__(self, raw: psycopg.Connection) -> None:
        self.raw = raw
        self._pg = raw.pgconn
        self._tx = psycopg.adapt.Transformer(raw)
        self._encoding = self._tx.encoding
        self._changes = 0
        self._prefix: tuple[str, ...] = ()
        self._unread = False   # a COMMIT went out whose answer is not read yet (`end(wait=False)`)
        self._seen: dict[tuple, int] = {}      # statements run once, not prepared yet
        self._names: dict[tuple, bytes] = {}   # statements given a name (prepared at their next run)
        self._parsed: set[bytes] = set()        # names whose Parse went out
        self._made = 0
        # The writer's: rows the store writes once, at the transaction's end (end_writes.py).
        self.end_writes: EndWrites | None = None
        # Writes whose answer nobody reads (`later`), sent with the next statement.
        self._later: list[tuple] = []
        self.later_failed = False   # the last error raised came from one of those

    def begin(self, *commands: str) -> None:
        if self._later:   # after the writes sent later, in order (a savepoint mid-job)
            self._later.extend((command.encode(), None, None, None, None) for command in commands)
        else:
            self._prefix = commands

    @property
    def pending(self) -> bool:
        """The commands given to `begin` are not sent yet (no statement ran or waits to go)."""
        return bool(self._prefix) and not self._later

    def later(self, sql: str, params=()) -> None:
        """A write whose answer nobody reads (no rows, no `changes()`): sent with this
        connection's next statement, in the same pipeline, in order: a round trip fewer
        (docs/performance.md, "A turn on PostgreSQL"). Its error is raised by that statement's
        exchange, with `later_failed` set; the writer sends what is left before a job ends
        (`send_later`), so the error is the job's, as the write's own would have been."""
        self._later.append(self._bind(sql, params))

    def send_later(self) -> None:
        """Send the writes `later` holds now (one round trip), raising their error if any."""
        if self._later:
            self._exchange([])

    def drop_later(self) -> None:
        """Forget the writes not sent yet (their transaction or savepoint is rolled back)."""
        self._later.clear()

    def end(self, *, wait: bool = True) -> None:
        """COMMIT, if a statement opened the transaction. `wait=False` (a read's snapshot, which
        has nothing to make durable): the COMMIT is sent and its answer read before the
        connection's next use, so the read returns without waiting a round trip for it; the
        database ends the transaction as soon as the message arrives (no snapshot is held)."""
        if self.pending:
            self._prefix = ()
        elif wait:
            self.command("COMMIT")
        else:
            if self._unread:
                self._collect()
            pg = self._pg
            pg.enter_pipeline_mode()
            pg.send_query_params(b"COMMIT", None)
            pg.pipeline_sync()
            self._flush()
            self._unread = True

    def command(self, text: str) -> None:
        """A statement without parameters or rows (COMMIT, ROLLBACK, ...), now."""
        self._exchange([(text.encode(), None, None, None, None)])

    def _collect(self) -> None:
        """Read the answer of a COMMIT sent by `end(wait=False)` (waiting without the GIL)."""
        self._unread = False
        for result in self._results():
            if result.status != pq.ExecStatus.COMMAND_OK:
                # A read-only snapshot's COMMIT has nothing to lose; say so and go on.
                log.warning("a read's COMMIT answered %s", pq.ExecStatus(result.status).name)

    def abort(self) -> None:
        """ROLLBACK whatever is open (after a failure; nothing is sent when nothing is open)."""
        self._prefix = ()
        self._later.clear()
        if self._unread:
            self._collect()
        if self._pg.transaction_status != _IDLE:
            self.command("ROLLBACK")

    @property
    def idle(self) -> bool:
        """No transaction is open on the connection."""
        if self._unread:
            self._collect()
        return self._pg.transaction_status == _IDLE

    # -- the wire ------------------------------------------------------------------------------
    def _bind(self, sql: str, params) -> tuple:
        """(text, name or None, values, types, formats) of one execution of `sql`."""
        stmt = to_postgres(sql)
        tx = self._tx
        args = [_param(p) for p in stmt.params(params)]
        values = tx.dump_sequence(args, [_AUTO] * len(args)) if args else None
        types = tx.types if args else ()
        key = (stmt.text, types)
        name = self._names.get(key)
        if name is None:
            if self._seen.get(key):
                name = self._prepare(key)
            else:
                if len(self._seen) >= PREPARED_MAX * 4:
                    self._seen.clear()
                self._seen[key] = 1
        return (key, name, values, types, tx.formats if args else None)

    def _prepare(self, key: tuple) -> bytes | None:
        """A name for `key`'s statement (its Parse goes with its next execution), or None when
        PREPARED_MAX are kept already (it then runs unnamed, as at its first use)."""
        del self._seen[key]
        if len(self._names) >= PREPARED_MAX:
            return None
        self._made += 1
        name = self._names[key] = b"s%d" % self._made
        return name

    def _exchange(self, items: list[tuple]) -> list:
        """Send the pending `begin` commands and `items` in one pipeline, then read every answer
        (one round trip). Returns a PGresult per item; raises the first statement's error."""
        if self._unread:
            self._collect()
        pg = self._pg
        prefix, self._prefix = self._prefix, ()
        self.later_failed = False
        mine: list = []   # per result to come: True for an item's, a key for a Parse's, else False
        pg.enter_pipeline_mode()
        for command in prefix:
            pg.send_query_params(command.encode(), None)
            mine.append(False)
        if self._later:
            later, self._later = self._later, []
            start = len(mine)
            self._send_items(later, mine)
            for i in range(start, len(mine)):
                if mine[i] is True:
                    mine[i] = None   # answered, its error raised, its rows not returned
        self._send_items(items, mine)
        pg.pipeline_sync()
        self._flush()
        return self._settle(self._results(), mine)

    def _send_items(self, items: list[tuple], mine: list) -> None:
        """Send each item (its Parse first when its name is new), noting in `mine` what answers."""
        pg = self._pg
        for key, name, values, types, formats in items:
            if name is None:
                text = key if type(key) is bytes else key[0].encode()
                pg.send_query_params(text, values, param_types=types, param_formats=formats, result_format=_BINARY)
            else:
                if name not in self._parsed:
                    pg.send_prepare(name, key[0].encode(), param_types=types)
                    self._parsed.add(name)
                    mine.append(key)
                pg.send_query_prepared(name, values, param_formats=formats, result_format=_BINARY)
            mine.append(True)

    def _settle(self, results: list, mine: list) -> list:
        """The items' results of one pipeline; raises the first error in it."""
        if len(results) != len(mine):
            raise psycopg.OperationalError(f"expected {len(mine)} results from the database, got {len(results)}")
        error = None
        for result, what in zip(results, mine):
            if result.status == _FATAL and error is None:
                error = psycopg.errors.error_from_result(result, encoding=self._encoding)
                self.later_failed = what is None
            if type(what) is tuple and result.status != pq.ExecStatus.COMMAND_OK:
                # Its Parse failed or was skipped: no such statement (named again at its next run).
                self._parsed.discard(self._names.pop(what, b""))
        if error is not None:
            raise error
        return [result for result, what in zip(results, mine) if what is True]

    def _flush(self) -> None:
        pg = self._pg
        while pg.flush():   # (a large statement on a full socket buffer: read as we wait)
            readable, _w, _x = select.select([pg.socket], [pg.socket], [])
            if readable:
                pg.consume_input()

    def _results(self) -> list:
        """Every result up to the pipeline's sync, then out of pipeline mode."""
        pg = self._pg
        sock = pg.socket
        out = []
        try:
            while True:
                while pg.is_busy():
                    select.select([sock], [], [])
                    pg.consume_input()
                result = pg.get_result()
                if result is None:
                    continue
                if result.status == _SYNC:
                    break
                out.append(result)
        finally:
            if pg.pipeline_status and not pg.is_busy():
                try:
                    pg.exit_pipeline_mode()
                except psycopg.OperationalError:
                    pass
        if pg.status != pq.ConnStatus.OK:
            raise psycopg.OperationalError("the connection to the database was lost")
        return out

    def _load(self, result) -> list:
        if result.status != _TUPLES_OK:
            return []
        tx = self._tx
        tx.set_pgresult(result)
        rows = tx.load_rows(0, result.ntuples, tuple)
        tx.set_pgresult(None)
        return rows

    def execute(self, sql: str, params=()) -> _Rows:
        (result,) = self._exchange([self._bind(sql, params)])
        self._changes = result.command_tuples or 0
        return _Rows(self._load(result)) if result.status == _TUPLES_OK else _NO_ROWS

    def executemany(self, sql: str, seq) -> None:
        items = [self._bind(sql, params) for params in seq]
        if not items:
            self._changes = 0
            return
        self._changes = sum(result.command_tuples or 0 for result in self._exchange(items))

    def fetch_each(self, statements: list[tuple[str, tuple]]) -> list[list[tuple]]:
        """The rows of each (sql, params), all sent in one round trip (the statements must not
        depend on each other's results)."""
        return [self._load(result) for result in self._exchange([self._bind(s, p) for s, p in statements])]

    def changes(self) -> int:
        return self._changes


class PgDatabase(WriteQueue, ReaderThreads):
    backend = "postgresql"
    shared = True          # several servers on one store: leases and notices cross processes
    traits = POSTGRES
    reader_threads = 4     # handlers' reads wait on the network here, not on the CPU
    batch_limit = BATCH_LIMIT

    def __init__(self, url: StorageURL, *, connect_timeout: float = 10.0,
                 target: PgSchemaTarget | None = None) -> None:
        if not url.is_postgresql:
            raise ValueError(f"not a postgresql:// URL: {url}")
        self.url = url
        self.path = str(url)   # what logs and errors may show (redacted)
        self.local_path: str | None = None   # a database server: no file here
        self._timeout = connect_timeout
        self._target = target or PgSchemaTarget.current()
        self._version = 0
        self.created = False   # the schema was empty when start() found it
        self._reader: PgConn | None = None
        self._reading = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._riders: list[Job] = []   # write_nowait(ride=True): carried by the next job
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._accepting = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._claimers: dict[bool, _LoopClaimer] = {}
        # aread_each's connections: read-only snapshots, or (True) a read's claim with its reads.
        self._loop_readers = {claims: _LoopSlot(functools.partial(self._connect, reader=not claims, snapshots=True,
                                                                  claims=claims)) for claims in (False, True)}
        self._thread_conns: list[PgConn] = []
        self._local = threading.local()
        self.database = ""
        self.schema = ""
        self.batches = 0
        self.jobs = 0
        self.cuts = 0    # jobs cut from a batch (a lock waited for past BATCH_LOCK_WAIT_MS), run alone

    def notice_bus(self):  # noqa: ANN201
        """The LISTEN/NOTIFY bus of this database and schema (server/live/cluster.py carries
        publications on it), once started."""
        from .bus import PgNoticeBus, channel_for

        return PgNoticeBus(self.url.dsn(), channel_for(self.database, self.schema), display=str(self.url))

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return self._version

    def _connect(self, *, reader: bool, snapshots: bool = False, claims: bool = False) -> PgConn:
        """A reader's transactions are read-only snapshots (REPEATABLE READ); a writer's are
        READ COMMITTED, PostgreSQL's default, under which the counter row orders appenders.
        `claims` (with `snapshots`): snapshots that may write a replay claim first, committed
        without waiting for the disk (`aread_each(..., claim=)`)."""
        try:
            raw = psycopg.connect(self.url.dsn(), autocommit=True, connect_timeout=max(1, int(self._timeout)),
                                  cursor_factory=psycopg.RawCursor, prepare_threshold=PREPARE_THRESHOLD)
        except psycopg.Error as exc:
            raise StorageUnavailable(f"cannot connect to {self.url}: {_reason(exc, self.url)}") from None
        raw.prepared_max = PREPARED_MAX
        if snapshots:
            # Each pipeline (up to its Sync) is one implicit transaction: one read-only snapshot,
            # ended by the Sync itself, an error included (`_LoopConn`).
            raw.execute("SET default_transaction_isolation = 'repeatable read'")
            if claims:
                raw.execute("SET synchronous_commit = off")
                return PgConn(raw)
            raw.execute("SET default_transaction_read_only = on")
        if reader:
            raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            raw.read_only = True
            return PgConn(raw)
        raw.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        conn = PgConn(raw)
        conn.end_writes = EndWrites()
        return conn

    async def start(self) -> None:
        """Pass the schema gate (may raise PgSchemaGateError), then open the connections."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.url.dsn(), autocommit=True,
                                                         connect_timeout=max(1, int(self._timeout)))
        except psycopg.Error as exc:
            raise StorageUnavailable(f"cannot connect to {self.url}: {_reason(exc, self.url)}") from None
        try:
            try:   # an empty schema: the start line says "new database" (as on SQLite)
                cur = await conn.execute("SELECT to_regclass(quote_ident(current_schema()) || '.schema_version') IS NULL")
                self.created = bool((await cur.fetchone())[0])
            except psycopg.Error:
                pass   # the gate below says what is wrong
            self._version = await pass_gate(conn, str(self.url), self._target)
            cur = await conn.execute("SELECT current_database(), current_schema()")
            self.database, self.schema = await cur.fetchone()
        finally:
            await conn.close()
        await asyncio.to_thread(self._open_connections)

    def start_sync(self) -> None:
        """`start` for scripts and tools that have no event loop running."""
        asyncio.run(self.start())

    def _open_connections(self) -> None:
        if self._thread is not None:
            raise RuntimeError("database already started")
        self._reader = self._connect(reader=True)
        writer = self._connect(reader=False)
        self._thread = threading.Thread(target=self._run, args=(writer,), name="db-writer:postgresql",
                                        daemon=True)
        self._accepting = True
        self._thread.start()

    @property
    def _loop_reader(self) -> _LoopConn | None:   # (aread_each's read-only connection, as tests look at it)
        return self._loop_readers[False].conn

    def _take_loop_slots(self) -> list[_LoopSlot]:
        """The slots of the loop's connections (aread_each's, the claimers'), the claimers forgotten."""
        slots = [c.slot for c in self._claimers.values()] + list(self._loop_readers.values())
        self._claimers = {}
        return slots

    async def close(self) -> None:
        # The loop's own connections first, on the loop (their sockets are watched by it).
        for slot in self._take_loop_slots():
            conn = slot.take()
            if conn is not None:
                conn.close()
        await asyncio.to_thread(self.close_sync)

    def close_sync(self) -> None:
        self._stop_writer()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._pool = None
        for slot in self._take_loop_slots():   # (closed without `close`: their loop is gone or going)
            loop_conn = slot.take()
            if loop_conn is not None:
                loop_conn.conn.raw.close()
        for conn in [self._reader, *self._thread_conns]:
            if conn is not None:
                conn.raw.close()
        self._reader = None
        self._thread_conns.clear()

    # -- reads -----------------------------------------------------------------------------
    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(conn, *args)` in one read-only snapshot, on the caller's thread."""
        conn = self._reader
        if conn is None:
            raise DatabaseClosed("database is not open")
        if self._reading:   # nested read: already inside the snapshot
            return fn(conn, *args)
        self._reading = True
        try:
            return self._snapshot(conn, fn, args)
        except psycopg.OperationalError:
            # The connection broke (a database restart, a network cut): a read can simply be
            # run again, once, on a new one.
            log.warning("reader connection to %s lost; reconnecting", self.url)
            conn.raw.close()
            self._reader = conn = self._connect(reader=True)
            return self._snapshot(conn, fn, args)
        finally:
            self._reading = False

    @staticmethod
    def _snapshot(conn: PgConn, fn, args) -> Any:
        conn.begin(*_BEGIN_READ)
        try:
            value = fn(conn, *args)
        except BaseException:
            conn.abort()
            raise
        conn.end(wait=False)
        return value

    async def aread(self, fn: Callable[..., Any], *args: Any, large: bool = False) -> Any:
        """A handler's read: a round trip to the database, so it runs on a reader thread and the
        event loop serves everyone else meanwhile, whatever its size."""
        return await self._on_reader_thread(fn, args)

    def _open_thread_reader(self) -> PgConn:
        return self._connect(reader=True)

    def _thread_reader_usable(self, conn: PgConn) -> bool:
        return not conn.raw.closed

    def process_lock(self) -> None:
        """Shared by design: no process lock; runs are leased instead (`leases`)."""
        return None

    # -- replay claims (several servers) ---------------------------------------------------
    async def claim_signature(self, sig: bytes, expires_at: int, now: int, *, durable: bool) -> bool:
        """True when this server now holds the signature, False when a live claim exists
        anywhere. Not queued behind the writer's jobs: claims have a connection of their own per
        durability, driven by the event loop itself (no thread to hand them to and back), each
        batch the claims made in one turn of the loop, in one statement and one transaction
        (group commit, as the writer's; `_LoopClaimer`). `durable=False` commits without waiting
        for the disk (`synchronous_commit = off`): the row is visible to every server at once,
        and only a database crash could forget it."""
        if self._reader is None:
            raise DatabaseClosed("database is not open")
        claimer = self._claimers.get(durable)
        if claimer is None:
            claimer = self._claimers[durable] = _LoopClaimer(self, durable)
        return await claimer.claim(bytes(sig), expires_at, now)

    async def aread_each(self, fn: Callable[..., list], *args: Any,
                         claim: tuple[str, tuple] | None = None) -> list[list[tuple]]:
        """The rows of each statement `fn(*args)` gives, all in one snapshot and one round trip
        on a connection the event loop drives itself: no thread hand-off (`_LoopConn`). For reads
        that do not depend on each other (GetSession's: server/store/session_view.py).

        `claim`: a read's replay claim (server/store/handed_claim.py), sent first in the same
        round trip and transaction, its rows first in the answer; on a connection of its own
        that may write, committing without waiting for the disk (as a read's claim made alone),
        REPEATABLE READ (one snapshot, taken at the claim: a claim that meets another server's
        newer row fails to serialize, and the whole exchange runs again, seeing it)."""
        if self._reader is None:
            raise DatabaseClosed("database is not open")
        statements = fn(*args)
        if claim is not None:
            statements = [claim, *statements]
        lost = retried = 0
        while True:
            conn = await self._loop_readers[claim is not None].get()
            try:
                return await conn.exchange([conn.conn._bind(sql, params) for sql, params in statements])
            except psycopg.OperationalError:
                if lost:   # a read can simply be run again, once, on a new connection (a claim
                    raise  # too: the lost one committed nothing, or its row is refused as ours)
                lost += 1
                log.warning("loop reader connection to %s lost; reconnecting", self.url)
            except _RETRYABLE:
                retried += 1
                if claim is None or retried == RETRIES:
                    raise

    def _claim_connection(self, durable: bool) -> PgConn:
        conn = self._connect(reader=False)
        if not durable:
            conn.raw.execute("SET synchronous_commit = off")
        return conn

    # -- the writer thread (jobs come in through WriteQueue's write, write_nowait, write_sync)
    def _run(self, conn: PgConn) -> None:
        try:
            stop = False
            while not stop:
                first = self._queue.get()
                if first is _STOP:
                    break
                batch = [first]
                stop = self._take_queued(batch)
                conn = self._run_batch(conn, batch)
        finally:
            self._fail_queued()
            conn.raw.close()

    def _run_batch(self, conn: PgConn, batch: list[Job]) -> PgConn:
        """Group commit: run `batch` in as few transactions as the locks allow, each job in its
        own savepoint, and settle every job once its transaction ended (in job order).

        A batch's transaction never waits for a row lock longer than `BATCH_LOCK_WAIT_MS`
        (`lock_timeout`, set for that transaction only). A job that would wait longer (or is
        chosen as a deadlock's victim, or fails to serialize) is rolled back to its savepoint;
        the jobs before it commit, then it runs alone in a transaction of its own that waits as
        long as it must (`_run_job`, with its retries), and the jobs after it form the next
        batch. So jobs commit in submission order, each once, and a batch never holds its locks
        while it waits for another transaction's: no wait-for cycle can keep a batch
        (docs/storage.md, "Group commit on PostgreSQL")."""
        while batch:
            if len(batch) == 1:
                conn = self._run_job(conn, batch[0])
                deliver(batch)
                return conn
            conn, done = self._batch_transaction(conn, batch)
            deliver(batch[:done])
            if done < len(batch) and not batch[done].ok and batch[done].value is _CUT:
                self.cuts += 1
                job = batch[done]
                job.value = None
                conn = self._run_job(conn, job)
                deliver([job])
                done += 1
            batch = batch[done:]
        return conn

    def _batch_transaction(self, conn: PgConn, batch: list[Job]) -> tuple[PgConn, int]:
        """Run a prefix of `batch` in one transaction: returns how many jobs are settled (ran and
        committed, or failed), and marks the job it stopped at, if any, with `_CUT` (rolled back
        to its savepoint, to run alone next)."""
        raw = conn.raw
        ran = 0   # jobs of `batch` begun in this transaction
        opened = False   # a statement has gone out: the transaction is open
        end_writes = conn.end_writes
        end_writes.clear()
        try:
            for job in batch:
                # BEGIN (first) or the next savepoint go out with the job's first statement.
                conn.begin(*(_NEXT_JOB if opened else _FIRST_JOB))
                ran += 1
                end_writes.mark()
                go_on = self._job_in_savepoint(raw, conn, job)
                opened = opened or not conn.pending
                if not go_on:
                    ran -= 1   # cut here: this job is not part of the transaction
                    break
            if end_writes:
                # After the last job, in key order: a hot row is locked for these statements
                # and the COMMIT only.
                conn.begin(*(_END_WRITES if opened else (*_BEGIN_WRITE, *_END_WRITES)))
                end_writes.flush(conn)
                opened = True
            conn.begin()   # nothing left to send before the COMMIT
            if opened:
                conn.command("COMMIT")
        except _CUT_ERRORS as exc:
            # (Subclasses of OperationalError, but the connection is fine.) The jobs settle their
            # own; what reaches here is the end writes' (a deadlock PostgreSQL broke on this side,
            # with a lone job that wrote an agent's row itself): the transaction is aborted whole.
            return self._alone(conn, batch[:ran], exc), ran
        except psycopg.OperationalError as exc:
            # The connection broke. Before a COMMIT came back, whether it landed is unknown, so
            # no job of the transaction is reported done (as a lone job's is not) and none is
            # run again; the jobs after them go to the next batch, on a new connection.
            log.warning("writer connection to %s lost (%s); reconnecting", self.url, type(exc).__name__)
            for job in batch[:ran]:
                job.fail(exc)
            conn.raw.close()
            try:
                conn = self._connect(reader=False)
            except StorageUnavailable:
                pass   # still down: the next job fails on the closed one and tries again
            return conn, ran
        except psycopg.Error as exc:
            return self._alone(conn, batch[:ran], exc), ran
        self.batches += 1
        self.jobs += sum(1 for job in batch[:ran] if job.ok)
        return conn, ran

    def _alone(self, conn: PgConn, jobs: list[Job], exc: Exception) -> PgConn:
        """The transaction failed as a whole (e.g. COMMIT refused it): nothing of it committed,
        so each of its jobs runs again, alone, as jobs ran before group commit."""
        log.warning("batch transaction failed (%s); running its jobs one at a time", type(exc).__name__)
        conn.drop_later()
        if not conn.idle:
            conn.command("ROLLBACK")
        conn.end_writes.clear()
        for job in jobs:
            job.ok, job.value = False, None
            conn = self._run_job(conn, job)
        return conn

    @staticmethod
    def _job_in_savepoint(raw: psycopg.Connection, conn: PgConn, job: Job) -> bool:
        """Run `job` inside the current savepoint; False when the batch must stop before it
        (its savepoint rolled back, the job marked `_CUT`). A job that fails is rolled back to
        its savepoint alone and keeps its error; its batch-mates go on."""
        for _attempt in range(RETRIES):
            try:
                job.value = job.fn(conn, *job.args)
                conn.send_later()   # (its writes' errors are its own, not the next job's)
                job.ok = True
                return True
            except pg_errors.UniqueViolation as exc:
                # Another server's commit won an idempotency race: run the job again (READ
                # COMMITTED: its statements now see the winner's row), up to RETRIES times.
                _rollback_job(raw, conn)
                job.fail(exc)
            except _CUT_ERRORS:
                _rollback_job(raw, conn)
                job.ok, job.value = False, _CUT
                return False
            except psycopg.OperationalError:
                raise
            except Exception as exc:
                job.fail(exc)
                _rollback_job(raw, conn)   # whatever it wrote before it failed goes too
                return True
        return True

    def _run_job(self, conn: PgConn, job: Job) -> PgConn:
        for attempt in range(RETRIES):
            try:
                conn.begin(*_BEGIN_WRITE)
                conn.end_writes.clear()
                try:
                    job.value = job.fn(conn, *job.args)
                    conn.end_writes.flush(conn)
                    conn.end()   # (the job's writes sent later go with it, and fail it)
                except BaseException:
                    conn.end_writes.clear()
                    conn.abort()
                    raise
                job.ok = True
                self.jobs += 1
                self.batches += 1
                return conn
            except _RETRYABLE as exc:
                job.ok = False
                if attempt == RETRIES - 1:
                    job.value = exc
                    return conn
            except psycopg.OperationalError as exc:
                # The connection broke mid-job: whether a COMMIT in flight landed is unknown, so
                # the job is reported failed, not run again; the next job gets a new connection.
                job.fail(exc)
                log.warning("writer connection to %s lost (%s); reconnecting", self.url, type(exc).__name__)
                conn.raw.close()
                try:
                    return self._connect(reader=False)
                except StorageUnavailable:
                    return conn   # still down: the next job fails on the closed one and tries again
            except Exception as exc:
                job.fail(exc)
                return conn
        return conn


def _rollback_job(raw: psycopg.Connection, conn: PgConn) -> None:
    """Undo what the current job of a batch did: back to its savepoint, if its first statement
    (which carries the savepoint) went out; else nothing of it reached the database."""
    conn.drop_later()
    if not conn.pending:
        conn.command(_ROLLBACK_TO)
    conn.end_writes.rollback()


# One statement for every claim of a batch: the rows go in in signature order (so two servers'
# batches lock the rows they share in the same order and cannot deadlock), a live row is kept,
# an expired one is taken over, and the signatures this batch now holds come back.
_CLAIM_BATCH = (
    "INSERT INTO accepted_signatures (sig, expires_at)"
    " SELECT s, e FROM unnest(?1::bytea[], ?2::bigint[]) AS c(s, e) ORDER BY s"
    " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
    " WHERE accepted_signatures.expires_at < ?3 RETURNING sig")
CLAIM_BATCH_LIMIT = 256


class _LoopConn:
    """A connection the event loop drives itself, without a thread: libpq in pipeline mode and
    non-blocking, its socket watched by the loop. `exchange(items)` sends the items and a Sync
    and returns (a future of) their rows; several exchanges may be in flight, answered in order.
    The statements up to each Sync are one implicit transaction, committed (or, after an error,
    rolled back) by the Sync itself: nothing is left open between exchanges."""

    def __init__(self, conn: PgConn) -> None:
        self.conn = conn
        self.pg = conn._pg
        self.loop = asyncio.get_running_loop()
        self.waiting: collections.deque = collections.deque()   # [future, mine, results] per exchange
        self.broken: Exception | None = None
        self._writing = False
        self._closed = False
        self.pg.nonblocking = 1
        self.pg.enter_pipeline_mode()
        # The socket's number, kept: once libpq drops a lost connection it no longer tells it, and
        # the loop must stop watching it (a new connection may get the same number).
        self.fd = self.pg.socket
        self.loop.add_reader(self.fd, self._readable)

    def exchange(self, items: list[tuple]) -> asyncio.Future:
        future = self.loop.create_future()
        if self.broken is not None:
            future.set_exception(self.broken)
            return future
        mine: list = []
        try:
            self.conn._send_items(items, mine)
            self.pg.pipeline_sync()
            self.waiting.append([future, mine, []])
            self._flush()
        except psycopg.Error as exc:
            self._break(exc)
        return future

    def _flush(self) -> None:
        if self.pg.flush() and not self._writing:   # the rest when the socket takes it
            self._writing = True
            self.loop.add_writer(self.fd, self._writable)

    def _writable(self) -> None:
        try:
            if not self.pg.flush():
                self._writing = False
                self.loop.remove_writer(self.fd)
        except psycopg.Error as exc:
            self._break(exc)

    def _readable(self) -> None:
        pg = self.pg
        try:
            pg.consume_input()
            while self.waiting and not pg.is_busy():
                result = pg.get_result()
                if result is None:
                    continue
                head = self.waiting[0]
                if result.status != _SYNC:
                    head[2].append(result)
                    continue
                self.waiting.popleft()
                future, mine, results = head
                try:
                    value = [self.conn._load(r) for r in self.conn._settle(results, mine)]
                except psycopg.Error as exc:
                    if not future.done():
                        future.set_exception(exc)
                else:
                    if not future.done():
                        future.set_result(value)
            if pg.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the connection to the database was lost")
        except psycopg.OperationalError as exc:
            self._break(exc)

    def _break(self, exc: Exception) -> None:
        """The connection is lost: every exchange in flight fails with `exc` (whether a claim in
        it landed is unknown: it is refused, and the client signs again), the next use reconnects."""
        if self.broken is None:
            self.broken = exc
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(exc)
        self.close()

    def close(self) -> None:
        # Once only: a lost connection closes itself (`_break`) and is closed again when replaced
        # or at shutdown, and by then its socket's number may watch another connection's socket.
        if self._closed:
            return
        self._closed = True
        try:
            self.loop.remove_reader(self.fd)
            if self._writing:
                self.loop.remove_writer(self.fd)
        except (ValueError, OSError):
            pass   # the socket is gone already
        if self.broken is None:
            self.broken = DatabaseClosed("database closed")
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(self.broken)
        self.conn.raw.close()


class _LoopSlot:
    """Where one use of the loop (a kind of `aread_each`, a claimer) keeps its `_LoopConn`: `get()`
    gives it, replacing one that was lost (or not made yet) under a lock, so callers that find it
    lost at once make one new connection; `connect` opens the PgConn (on a thread: it blocks)."""

    def __init__(self, connect: Callable[[], PgConn]) -> None:
        self._connect = connect
        self.conn: _LoopConn | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> _LoopConn:
        conn = self.conn
        if conn is None or conn.broken is not None:
            async with self._lock:
                conn = self.conn
                if conn is None or conn.broken is not None:
                    if conn is not None:
                        conn.close()   # (a lost one has closed itself: `close` runs once)
                    conn = self.conn = _LoopConn(await asyncio.to_thread(self._connect))
        return conn

    def take(self) -> _LoopConn | None:
        """The connection, forgotten here (for the caller to close)."""
        conn, self.conn = self.conn, None
        return conn


class _LoopClaimer:
    """Replay claims on a `_LoopConn`: the claims made in one turn of the loop go in one
    statement (`_CLAIM_BATCH`), sent at the end of that turn; batches are pipelined."""

    def __init__(self, db: PgDatabase, durable: bool) -> None:
        self.slot = _LoopSlot(lambda: db._claim_connection(durable))
        self._batch: list = []
        self._tasks: set[asyncio.Future] = set()

    async def claim(self, sig: bytes, expires_at: int, now: int) -> bool:
        future = asyncio.get_running_loop().create_future()
        if not self._batch:
            asyncio.get_running_loop().call_soon(self._send_batch)
        self._batch.append((sig, expires_at, now, future))
        return await future

    def _send_batch(self) -> None:
        batch, self._batch = self._batch, []
        for start in range(0, len(batch), CLAIM_BATCH_LIMIT):
            task = asyncio.ensure_future(self._settle(batch[start:start + CLAIM_BATCH_LIMIT]))
            self._tasks.add(task)   # (kept until done: the loop holds tasks weakly)
            task.add_done_callback(self._tasks.discard)

    async def _settle(self, batch: list) -> None:
        try:
            held = await self._claim_batch(batch)
        except Exception as exc:
            for item in batch:
                if not item[3].done():
                    item[3].set_exception(exc)
            return
        for sig, _expires_at, _now, future in batch:
            if not future.done():
                future.set_result(held.pop(sig, False))   # a signature twice in a batch: the first has it

    @property
    def conn(self) -> _LoopConn | None:   # (its connection, as tests look at it)
        return self.slot.conn

    async def _claim_batch(self, batch: list) -> dict[bytes, bool]:
        """{sig: True} for each signature this batch now holds. The same signature twice in one
        batch goes in once (its later copies are refused, as they would be one after another);
        `now` is the batch's earliest (an expiry is judged no later than any claim's own clock)."""
        first: dict[bytes, int] = {}
        for sig, expires_at, _now, _future in batch:
            first.setdefault(sig, expires_at)
        params = (list(first), list(first.values()), min(item[2] for item in batch))
        attempt = 0
        while True:
            conn = await self.slot.get()
            try:   # one statement up to its Sync: its own transaction, one round trip
                (rows,) = await conn.exchange([conn.conn._bind(_CLAIM_BATCH, params)])
                return {bytes(r[0]): True for r in rows}
            except _RETRYABLE:
                attempt += 1
                if attempt == RETRIES:
                    raise

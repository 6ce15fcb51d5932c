"""Database: the SQLite adapter's façade over one file (the storage port: server/database/port.py).

`read` runs on the caller's thread with a dedicated reader connection: the store's reads are
short indexed lookups, and apsw releases the GIL while SQLite works. A handler's `aread` is that
same read, inline (it never suspends, so an inline handler stays inline), unless the handler says
the answer can be large (`large=True`: ListAgents, GetAgent, a GetSession page past its first
part): then it runs on a small pool of reader threads, each with its own connection, so the event
loop keeps serving everyone else meanwhile. Writes go to one writer
thread that group-commits: it takes every queued job (up to `batch_limit`), runs them in one
`BEGIN IMMEDIATE` transaction, each in its own savepoint so a failing job is rolled back alone,
commits once (one fsync for the batch), and only then resolves the callers, in job order. The
event loop never waits for an fsync, and no transaction stays open while the queue is empty.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from typing import Any, Callable

import apsw

from ..workers import STOP as _STOP
from ..workers import DatabaseClosed, Job, ReaderThreads, WriteQueue, deliver
from . import dblock
from .gate import SQLITE, SchemaTarget, open_database, open_reader

log = logging.getLogger(__name__)


# How long a lazy write (write_nowait(lazy=True)) may wait for another job to commit with.
LAZY_S = 0.02


class WriteAborted(RuntimeError):
    """SQLite rolled back the whole batch transaction (e.g. disk full); this job did not commit."""


class Database(WriteQueue, ReaderThreads):
    """One writer thread (group commit), one reader connection for the event-loop thread, and a
    small pool of reader threads for large reads."""

    backend = "sqlite"
    shared = False     # one server process owns the file (server/database/sqlite/dblock.py)
    traits = SQLITE
    reader_threads = 2   # the machine's cores serve the loop and the writer too

    def __init__(self, path: str, *, batch_limit: int = 256, target: SchemaTarget | None = None) -> None:
        self.path = path
        self.local_path: str | None = path   # (storage/port.py: the questions asked of a backend)
        self.batch_limit = batch_limit
        self._target = target or SchemaTarget.current()
        self._reader: apsw.Connection | None = None
        self._writer: apsw.Connection | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._riders: list[Job] = []   # write_nowait(ride=True): carried by the next job
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # orders submit against close: no job lands after _STOP
        self._accepting = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None   # large reads, made on first use
        self._thread_conns: list[apsw.Connection] = []
        self._local = threading.local()
        # Counters for metrics and the bench: committed batches and the jobs they carried.
        self.batches = 0
        self.jobs = 0

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return self._target.version

    @property
    def reader(self) -> apsw.Connection:
        if self._reader is None:
            raise DatabaseClosed("database is not open")
        return self._reader

    async def start(self) -> None:
        # The gate may migrate; keep that off the event loop.
        await asyncio.to_thread(self.start_sync)

    def start_sync(self) -> None:
        """Open through the schema gate (may raise SchemaGateError) and start the writer thread."""
        if self._thread is not None:
            raise RuntimeError("database already started")
        self._writer = open_database(self.path, target=self._target)
        try:
            self._reader = open_reader(self.path, target=self._target)
        except BaseException:
            self._writer.close()
            self._writer = None
            raise
        self._thread = threading.Thread(target=self._run, name=f"db-writer:{self.path}", daemon=True)
        self._accepting = True
        self._thread.start()

    async def close(self) -> None:
        """Commit every write queued so far, then close both connections."""
        await asyncio.to_thread(self._stop_writer)
        self._close_reader()

    def close_sync(self) -> None:
        self._stop_writer()
        self._close_reader()

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)   # no read in flight past this point
        for conn in self._thread_conns:
            conn.close()
        self._thread_conns.clear()

    def process_lock(self) -> dblock.DatabaseLock:
        """One server per file: the lock `seed-agents serve` takes before opening it."""
        return dblock.DatabaseLock(self.path)

    def notice_bus(self) -> None:
        return None   # one server owns the file: nothing to tell other servers

    # -- reads -----------------------------------------------------------------------------
    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The runtime's read: `fn(reader, *args)` in one read transaction (one consistent
        snapshot), on the caller's thread; it never suspends."""
        conn = self.reader
        if conn.in_transaction:  # nested read: already inside a snapshot
            return fn(conn, *args)
        return self._snapshot(conn, fn, args)

    async def aread(self, fn: Callable[..., Any], *args: Any, large: bool = False) -> Any:
        """A handler's read: `read` itself (it never suspends, so an inline handler stays inline),
        or, when the answer can be `large`, on a reader thread so the loop is not held while it
        decodes."""
        if large:
            return await self._on_reader_thread(fn, args)
        return self.read(fn, *args)

    async def aread_each(self, fn: Callable[..., list], *args: Any,
                         claim: tuple[str, tuple] | None = None) -> list[list[tuple]]:
        """The rows of each (sql, params) of `fn(*args)`, in one snapshot, inline (`read`).
        (`claim`: a shared backend's; one server keeps its replay claims in memory.)"""
        if claim is not None:
            raise ValueError("one server makes no replay claim in the database")
        return self.read(lambda conn: [conn.execute(sql, params).fetchall() for sql, params in fn(*args)])

    def _open_thread_reader(self) -> apsw.Connection:
        return open_reader(self.path, target=self._target)

    @staticmethod
    def _snapshot(conn: apsw.Connection, fn: Callable[..., Any], args: tuple) -> Any:
        conn.execute("BEGIN")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("COMMIT")

    # -- the writer thread -----------------------------------------------------------------
    def _run(self) -> None:
        conn = self._writer
        assert conn is not None
        try:
            stop = False
            while not stop:
                first = self._queue.get()
                if first is _STOP:
                    break
                batch = [first]
                if first.lazy:
                    # Nobody waits for it and its loss in a crash is harmless (a run marked
                    # running): held back a little for a job that must commit now, so the two
                    # share one commit, one fsync (a short turn's ending follows its start).
                    deadline = time.monotonic() + LAZY_S
                    while batch[-1].lazy and len(batch) < self.batch_limit:
                        try:
                            job = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                        except queue.Empty:
                            break
                        if job is _STOP:
                            stop = True
                            break
                        batch.append(job)
                stop = self._take_queued(batch) or stop   # (nothing is queued behind a stop)
                try:
                    self._commit(conn, batch)
                except Exception as exc:  # the connection itself failed: report, keep serving
                    log.exception("write batch failed")
                    try:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                    except apsw.Error:
                        log.exception("rollback after a failed batch failed")
                    for job in batch:
                        job.fail(exc)
                deliver(batch)
        finally:
            self._fail_queued()
            conn.close()
            self._writer = None

    def _commit(self, conn: apsw.Connection, batch: list[Job]) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:  # e.g. another process held the lock past busy_timeout
            for job in batch:
                job.fail(exc)
            return
        for i, job in enumerate(batch):
            conn.execute("SAVEPOINT job")
            try:
                job.value = job.fn(conn, *job.args)
                job.ok = True
            except Exception as exc:
                job.fail(exc)
            if conn.in_transaction:
                if not job.ok:
                    conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
            else:
                # SQLite (or the job, against the rules) ended the transaction: the work of the
                # jobs before this one is gone, so they must not be reported as committed.
                lost = WriteAborted("the batch transaction was rolled back")
                for earlier in batch[:i + 1]:
                    if earlier.ok:
                        earlier.fail(lost)
                conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("COMMIT")
        except apsw.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in batch:
                if job.ok:
                    job.fail(exc)
            return
        self.batches += 1
        self.jobs += len(batch)

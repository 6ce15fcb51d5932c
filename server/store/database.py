"""Database: the async façade over one SQLite file.

Reads run synchronously on the caller's thread with a dedicated reader connection: they are
short indexed lookups, and apsw releases the GIL while SQLite works. A read whose answer can be
large (ListAgents, GetAgent, a GetSession page past its first part) uses `read_async`: it runs on
a small pool of reader threads, each with its own connection, so the event loop keeps serving
everyone else meanwhile. Writes go to one writer
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
from typing import Any, Callable

import apsw

from server.store.gate import SchemaTarget, open_database, open_reader

log = logging.getLogger(__name__)

_STOP = object()


class DatabaseClosed(RuntimeError):
    """A write was submitted after close() began, or before start()."""


class WriteAborted(RuntimeError):
    """SQLite rolled back the whole batch transaction (e.g. disk full); this job did not commit."""


class Job:
    __slots__ = ("fn", "args", "future", "loop", "ok", "value")

    def __init__(self, fn: Callable, args: tuple, future: Any, loop: asyncio.AbstractEventLoop | None):
        self.fn = fn
        self.args = args
        self.future = future  # asyncio.Future (with loop), concurrent Future, or None (nowait)
        self.loop = loop
        self.ok = False
        self.value: Any = None

    def fail(self, exc: BaseException) -> None:
        self.ok = False
        self.value = exc


READER_THREADS = 2   # read_async threads (the machine's cores serve the loop and the writer too)


class WriteQueue:
    """The submitting side of a writer thread, shared by both drivers' façades: jobs go into
    `_queue` in order, under `_lock` so none lands after the stop; the driver's writer thread
    runs them and settles each with `deliver`."""

    _queue: queue.SimpleQueue
    _lock: threading.Lock
    _accepting: bool
    _thread: threading.Thread | None

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(conn, *args)` on the writer thread; returns its result once committed.

        Cancelling the caller does not cancel the write: once queued it runs and commits.
        `fn` must not BEGIN/COMMIT itself and must return plain values (no live cursors).
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit(Job(fn, args, future, loop))
        return await future

    def write_nowait(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue a write nobody waits for (in order with the others); a failure is only logged."""
        self._submit(Job(fn, args, None, None))

    def write_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Blocking `write` for scripts, tests and other threads."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("write_sync from inside a write job would wait for itself")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._submit(Job(fn, args, future, None))
        return future.result()

    def _submit(self, job: Job) -> None:
        with self._lock:
            if not self._accepting:
                raise DatabaseClosed("database is closed or not started")
            self._queue.put(job)


class Database(WriteQueue):
    """One writer thread (group commit), one reader connection for the event-loop thread, and a
    small pool of reader threads for large reads."""

    shared = False     # one server process owns the file (server/dblock.py)
    dialect = "sqlite"

    def __init__(self, path: str, *, batch_limit: int = 256, target: SchemaTarget | None = None) -> None:
        self.path = path
        self.batch_limit = batch_limit
        self._target = target or SchemaTarget.current()
        self._reader: apsw.Connection | None = None
        self._writer: apsw.Connection | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # orders submit against close: no job lands after _STOP
        self._accepting = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None   # read_async, made on first use
        self._pool_readers: list[apsw.Connection] = []
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

    def _stop_writer(self) -> None:
        with self._lock:
            if not self._accepting:
                thread = self._thread
            else:
                self._accepting = False
                self._queue.put(_STOP)
                thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)   # no read in flight past this point
        for conn in self._pool_readers:
            conn.close()
        self._pool_readers.clear()

    # -- reads -----------------------------------------------------------------------------
    def read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(reader, *args)` in one read transaction, so it sees one consistent snapshot."""
        conn = self.reader
        if conn.in_transaction:  # nested read: already inside a snapshot
            return fn(conn, *args)
        conn.execute("BEGIN")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("COMMIT")

    async def aread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A handler's read: `read` itself here (it never suspends, so an inline handler stays
        inline), while on PostgreSQL, where a read is a network round trip, it runs off the loop
        (server/storage/pg_database.py)."""
        return self.read(fn, *args)

    async def read_async(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`read`, but on a reader thread with its own connection (one snapshot too): for reads
        whose answer can be large, so the event loop is not held while they decode."""
        if self._reader is None:
            raise DatabaseClosed("database is not open")
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(READER_THREADS, thread_name_prefix="db-reader")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._read_on_thread, fn, args)

    def _read_on_thread(self, fn: Callable[..., Any], args: tuple) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = open_reader(self.path, target=self._target)
            with self._lock:
                self._pool_readers.append(conn)
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
                while len(batch) < self.batch_limit:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if job is _STOP:
                        stop = True
                        break
                    batch.append(job)
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
            self._fail_leftovers()
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

    def _fail_leftovers(self) -> None:
        leftovers = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not _STOP:
                job.fail(DatabaseClosed("database closed before this write ran"))
                leftovers.append(job)
        deliver(leftovers)


def deliver(batch: list[Job]) -> None:
    """Hand results back: one loop callback per event loop, settling futures in job order."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Job]] = {}
    for job in batch:
        if job.future is None:
            if not job.ok:
                log.error("background write %s failed: %r", getattr(job.fn, "__name__", job.fn), job.value)
        elif job.loop is None:
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled by its owner; the write still happened
            if job.ok:
                job.future.set_result(job.value)
            else:
                job.future.set_exception(job.value)
        else:
            by_loop.setdefault(job.loop, []).append(job)
    for loop, jobs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, jobs)
        except RuntimeError:  # the loop is closed: nobody is left to wait
            pass


def _settle(jobs: list[Job]) -> None:
    for job in jobs:
        if job.future.done():  # the caller was cancelled; the write still happened
            continue
        if job.ok:
            job.future.set_result(job.value)
        else:
            job.future.set_exception(job.value)

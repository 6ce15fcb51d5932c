"""The threads a storage façade runs its work on, the same for every adapter: the write queue
(jobs submitted in order to the adapter's one writer thread, settled back on the caller's event
loop in job order) and the reader threads (a small pool, each thread with its own connection, for
reads the event loop must not wait for). The adapter supplies what differs: how a writer commits
a batch, how a connection is opened, what one read snapshot is.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from typing import Any, Callable

log = logging.getLogger(__name__)

STOP = object()   # put on the queue by close: the writer thread ends after the jobs before it


class DatabaseClosed(RuntimeError):
    """A write was submitted after close() began, or before start()."""


class Job:
    __slots__ = ("fn", "args", "future", "loop", "ok", "value", "lazy", "riders", "merge")

    def __init__(self, fn: Callable, args: tuple, future: Any, loop: asyncio.AbstractEventLoop | None,
                 lazy: bool = False, merge: Callable[[list[tuple]], tuple] | None = None):
        self.fn = fn
        self.args = args
        self.future = future  # asyncio.Future (with loop), concurrent Future, or None (nowait)
        self.loop = loop
        self.ok = False
        self.value: Any = None
        self.lazy = lazy      # may wait a little to share the next job's commit (write_nowait)
        self.riders: list[Job] | None = None   # run just before this one (write_nowait(ride=True))
        self.merge = merge    # a rider: how the args of several riders of `fn` become one job's

    def fail(self, exc: BaseException) -> None:
        self.ok = False
        self.value = exc


class WriteQueue:
    """The submitting side of a writer thread, shared by every adapter's façade: jobs go into
    `_queue` in order, under `_lock` so none lands after the stop; the driver's writer thread
    runs them and settles each with `deliver`."""

    _queue: queue.SimpleQueue
    _lock: threading.Lock
    _accepting: bool
    _thread: threading.Thread | None
    _riders: list[Job]    # write_nowait(ride=True) jobs waiting for the next job to carry them
    batch_limit: int

    def _take_queued(self, batch: list[Job]) -> bool:
        """(Writer thread) add the jobs already queued to `batch`, up to `batch_limit`, without
        waiting, and put the jobs each one carries (riders) just before it; True when the stop
        was among them (the jobs before it are in the batch)."""
        stop = False
        while len(batch) < self.batch_limit:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is STOP:
                stop = True
                break
            batch.append(job)
        if any(job.riders for job in batch):
            batch[:] = _unpacked(batch)
        return stop

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(conn, *args)` on the writer thread; returns its result once committed.

        Cancelling the caller does not cancel the write: once queued it runs and commits.
        `fn` must not BEGIN/COMMIT itself and must return plain values (no live cursors).
        """
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._submit(Job(fn, args, future, loop))
        return await future

    def write_nowait(self, fn: Callable[..., Any], *args: Any, lazy: bool = False,
                     ride: bool = False, merge: Callable[[list[tuple]], tuple] | None = None) -> None:
        """Queue a write nobody waits for (in order with the others); a failure is only logged.

        `lazy`: nothing is lost if it never commits (a crash before it is as good as no write),
        so a writer may hold it back a little, up to its LAZY_S, for a job that must commit now
        to carry it: one commit (one fsync) instead of two when another write follows soon.

        `ride`: not queued on its own: the next job submitted (by anyone) carries it, and the
        writer runs it just before that job, in its own savepoint, in the same batch; so it
        commits with or before that job, without a queue hop or a wake-up of the writer of its
        own. The caller that expects no job of its own to follow calls `release_riders()`.

        `merge` (with `ride`): the riders of `fn` carried in one batch run as one job, the first
        of them where it stands (before every carrier of the others), with the args
        `merge([args of each, in order])` gives: one statement and one savepoint for the batch
        instead of one per rider. Its failure is logged as any rider's."""
        job = Job(fn, args, None, None, lazy, merge if ride else None)
        if ride:
            with self._lock:
                if not self._accepting:
                    raise DatabaseClosed("database is closed or not started")
                self._riders.append(job)
            return
        self._submit(job)

    def release_riders(self) -> None:
        """Queue the riders no job has carried yet, as jobs of their own (in order)."""
        if self._riders:
            with self._lock:
                self._queue_riders()

    def _queue_riders(self) -> None:
        # (under _lock)
        for job in self._riders:
            self._queue.put(job)
        self._riders = []

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
            if self._riders:
                job.riders, self._riders = self._riders, []
            self._queue.put(job)

    def _stop_writer(self) -> None:
        """Take no more jobs, queue the stop behind those taken, and wait for the writer thread
        to run them and end (not when called from that thread)."""
        with self._lock:
            thread = self._thread
            if self._accepting:
                self._accepting = False
                self._queue_riders()
                self._queue.put(STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _fail_queued(self) -> None:
        """For the writer thread as it ends: every job still queued (behind the stop, or left by
        a writer that broke) fails with DatabaseClosed."""
        leftovers = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not STOP:
                for each in _unpacked([job]):
                    each.fail(DatabaseClosed("database closed before this write ran"))
                    leftovers.append(each)
        deliver(leftovers)


class ReaderThreads:
    """Reads on a small pool of threads, each with its own connection (opened on first use):
    `_on_reader_thread(fn, args)` runs `fn(conn, *args)` in one snapshot there. The adapter
    supplies `_open_thread_reader()`, `_snapshot(conn, fn, args)`, `_thread_reader_usable(conn)`
    and `reader_threads`; it closes `_thread_conns` on close, and sets `_reader` (its event
    loop's connection) to None once closed."""

    reader_threads = 2
    _reader: Any
    _pool: concurrent.futures.ThreadPoolExecutor | None
    _local: threading.local
    _lock: threading.Lock
    _thread_conns: list

    def _check_open(self) -> None:
        if self._reader is None:
            raise DatabaseClosed("database is not open")

    def _open_thread_reader(self) -> Any:
        raise NotImplementedError

    def _snapshot(self, conn: Any, fn: Callable[..., Any], args: tuple) -> Any:
        raise NotImplementedError

    def _thread_reader_usable(self, conn: Any) -> bool:
        return True

    async def _on_reader_thread(self, fn: Callable[..., Any], args: tuple) -> Any:
        self._check_open()
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.reader_threads, thread_name_prefix="db-reader")
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._read_on_thread, fn, args)

    def _read_on_thread(self, fn: Callable[..., Any], args: tuple) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or not self._thread_reader_usable(conn):
            conn = self._local.conn = self._open_thread_reader()
            with self._lock:
                self._thread_conns.append(conn)
        return self._snapshot(conn, fn, args)


def _unpacked(batch: list[Job]) -> list[Job]:
    """The batch with each job's riders just before it; riders that merge (write_nowait's
    `merge`) as one job, where the first of them stands."""
    out: list[Job] = []
    merging: dict[tuple, list[Job]] = {}
    for job in batch:
        if job.riders:
            for rider in job.riders:
                if rider.merge is not None:
                    group = merging.setdefault((rider.fn, rider.merge), [])
                    group.append(rider)
                    if len(group) > 1:
                        continue
                out.append(rider)
            job.riders = None
        out.append(job)
    for first, *others in merging.values():
        if others:
            assert first.merge is not None
            first.args = first.merge([first.args, *(other.args for other in others)])
    return out


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

"""The storage port: what a backend provides, so the store's queries (seed_agents.server.store) are written
once and run on any of them. Each backend is one folder implementing it (server/database/sqlite/,
server/database/postgres/); an adapter imports nothing of seed_agents.server.store (the queries sit above it); `seed_agents.server.database.database_for` picks one from the storage URL, and
tests/server/database/test_storage_conformance.py drives every one through this interface.

A store function is `fn(conn: Conn, *args)`: it runs inside a transaction the façade opens
(a read snapshot, or a write job), never begins or commits one itself, and returns plain values.
Its SQL is written in SQLite's spelling; an adapter rewrites what it must (PostgreSQL:
server/database/postgres/dialect.py). Where the backends differ beyond spelling, the connection's
`traits` say so, in one place per adapter: a query reads a trait, it never asks which backend.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from .end_writes import EndWrites


@dataclass(frozen=True)
class Traits:
    """How a backend differs where a query must know it."""

    name: str              # "sqlite" | "postgresql": health's `storage`, logs
    run_leases: bool       # runs in claimed/running hold a lease (several servers take runs)
    lock_rows: str         # appended to a SELECT to lock its rows until the transaction ends
    skip_locked: str       # ... and to skip rows another transaction holds (a queue's claim)
    like_ci: str           # case-insensitive LIKE (SQLite's LIKE is, for ASCII)
    text_search: str       # which full-text search the memory index has: "fts5" | "tsvector"
    # Each statement is a round trip (a database server): reads that do not depend on each
    # other go together (`conn.fetch_each`, one round trip), where in-process SQLite reads each
    # only when it needs it.
    batched_reads: bool = False
    # appended to a SELECT of rows the transaction then UPDATEs (no key changed): unlike
    # `lock_rows`, it does not wait for transactions that only insert rows referencing them
    lock_to_update: str = ""


class Rows(Protocol):
    """A statement's result: iterate it, or take one row or all."""

    def fetchone(self) -> tuple | None: ...

    def fetchall(self) -> list[tuple]: ...

    def __iter__(self) -> Iterator[tuple]: ...


@runtime_checkable
class Conn(Protocol):
    """The connection a store function is given (apsw's on SQLite, `PgConn` on PostgreSQL)."""

    traits: Traits
    # A group-committing writer's rows written once, at the transaction's end (end_writes.py);
    # None where every write is made at once (SQLite, readers).
    end_writes: EndWrites | None

    def execute(self, sql: str, params: Any = ()) -> Rows: ...

    def executemany(self, sql: str, seq: Any) -> Any: ...

    def changes(self) -> int: ...


def execute_later(conn: Conn, sql: str, params: Any = ()) -> None:
    """A write whose answer (rows, `changes()`) nobody reads: where the connection can (PgConn's
    `later`: each statement a round trip), it goes out with the connection's next statement, in
    the same transaction and in order, and its error is still the job's; elsewhere (SQLite,
    in-process) it runs now."""
    later = getattr(conn, "later", None)
    if later is None:
        conn.execute(sql, params)
    else:
        later(sql, params)


class ProcessLock(Protocol):
    def acquire(self) -> None: ...

    def release(self) -> None: ...


class Storage(Protocol):
    """A backend's façade.

    Reads: `read` is the runtime's (and the live layer's): on the caller's thread, one snapshot,
    it never suspends, which the subscription and grant invariants rest on. `aread` is a
    handler's: awaitable; the adapter decides where it runs (SQLite: inline, or on a reader
    thread when `large=True`; PostgreSQL, a network round trip: always on a reader thread).

    Writes: one writer thread runs the jobs in submission order; `write` resolves once the job
    committed, `write_nowait` queues one nobody waits for (`lazy=True`: one whose loss in a crash is
harmless, which may wait briefly to share the next commit; `ride=True`: one carried by the next job
submitted, run just before it, and queued alone by `release_riders()`; with `merge`, the riders of
one function in a batch run as one job), `write_sync` blocks.

    Lock or lease: a backend one process owns gives `process_lock()` (taken before start); a
    `shared` backend (several servers on one database) gives none, and its traits say
    `run_leases`: its schema has the lease columns the run lease queries use
    (server/store/leases.py), and it gives `claim_signature` for the replay guard across
    servers. Notices between servers travel on the shared backend's bus (`notice_bus()`,
    server/database/postgres/bus.py, carried by seed_agents.server.live.cluster).
    """

    backend: str          # Traits.name
    shared: bool
    path: str             # where it is, as logs may show it (a URL redacted)
    # The questions callers would otherwise ask by dialect ("is it PostgreSQL?"), answered here:
    # `local_path` is the database file on this machine (its folder must exist, a missing file
    # is a new database), None for a database server; `notice_bus()` is the bus notices between
    # servers travel on (a shared backend's), None when one server owns the store; which text
    # search the memory index has is `traits.text_search`.
    local_path: str | None
    traits: Traits
    batches: int
    jobs: int

    @property
    def schema_version(self) -> int: ...

    async def start(self) -> None: ...

    def start_sync(self) -> None: ...

    async def close(self) -> None: ...

    def close_sync(self) -> None: ...

    def process_lock(self) -> ProcessLock | None: ...

    def notice_bus(self) -> Any | None: ...

    def read(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    async def aread(self, fn: Callable[..., Any], *args: Any, large: bool = False) -> Any: ...

    # The rows of each (sql, params) of `fn(*args)`, in one snapshot: statements that do not
    # depend on each other, in one round trip where `traits.batched_reads`. `claim` (a shared
    # backend's): a read's replay claim, run first in the same transaction, its rows first.
    async def aread_each(self, fn: Callable[..., list], *args: Any,
                         claim: tuple[str, tuple] | None = None) -> list[list[tuple]]: ...

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def write_nowait(self, fn: Callable[..., Any], *args: Any, lazy: bool = False,
                     ride: bool = False, merge: Callable[[list[tuple]], tuple] | None = None) -> None: ...

    def release_riders(self) -> None: ...

    def write_sync(self, fn: Callable[..., Any], *args: Any) -> Any: ...



class SharedStorage(Storage, Protocol):
    """A `shared` backend (several servers on one database): the replay guard's claims are made
    in the database, so a signature accepted by one server is refused by the others."""

    async def claim_signature(self, sig: bytes, expires_at: int, now: int, *, durable: bool) -> bool: ...

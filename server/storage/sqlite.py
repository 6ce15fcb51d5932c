"""The SQLite driver of the storage port: today's store (server.store.*) behind the port.

Every call goes through server.store.database.Database (its schema gate, its reader, its
group-committing writer thread) and the existing query functions, so SQLite keeps its speed
and its file format: nothing here changes the schema.

What SQLite gives across processes: the seq counter, idempotency and replay signatures hold for
several connections on one file (each write is a BEGIN IMMEDIATE transaction; the file lock
orders them). What it does not: the runs table has no lease columns, so run leases live in this
object's memory, and notices travel within this process only. That is single-process
semantics, which is what an embedded SQLite deployment is (`shared_across_processes = False`):
one server owns the file's queue. A run a dead process left 'running' has no lease here, so
`requeue_expired` puts it back in the queue (the same as the runtime's requeue at start).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

import apsw

from server.storage.notices import LocalNoticeBus, encode_notice
from server.storage.port import IdempotencyConflict, LeaseLost, Notice, OnceResult, T
from server.storage.url import StorageURL
from server.store import agents as agents_q
from server.store import codec
from server.store import events as events_q
from server.store import idempotency as idem_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q
from server.store import signatures as sig_q
from server.store.accounts import ensure_account
from server.store.database import Database
from server.store.errors import NotFound
from server.store.gate import SchemaTarget

# The oldest queued run whose session has no older queued run and no live one. server.store has
# no such query yet (its runtime keeps one worker per session instead). "Live" is written as
# "not final" so it holds for every status set the runs table has had.
_FINAL = "('succeeded', 'failed', 'canceled')"
_CLAIMABLE = (
    "SELECT r.id, r.account_id, r.user_event_id FROM runs r WHERE r.status = 'queued'"
    " AND (r.session_id IS NULL OR NOT EXISTS ("
    f" SELECT 1 FROM runs o WHERE o.session_id = r.session_id AND o.status NOT IN {_FINAL}"
    "  AND o.id <> r.id AND (o.status <> 'queued' OR o.created_at < r.created_at"
    "   OR (o.created_at = r.created_at AND o.rowid < r.rowid))))"
    " ORDER BY r.created_at, r.rowid LIMIT 1")
# Status moves of the lease protocol, written here rather than through runs.set_run_status: they
# are the driver's own (claim counts an attempt, finish clears nothing else) and touch only
# columns every version of the runs table has.
_TO_RUNNING = ("UPDATE runs SET status = 'running', attempt = attempt + 1, error = NULL,"
               " updated_at = max(updated_at, ?) WHERE id = ? AND status = 'queued'")
_TO_QUEUED = ("UPDATE runs SET status = 'queued', updated_at = max(updated_at, ?)"
              " WHERE id = ? AND status = 'running'")
_TO_FINAL = ("UPDATE runs SET status = ?, error = ?, updated_at = max(updated_at, ?)"
             " WHERE id = ? AND status = 'running'")


def _drive(coro: Awaitable[Any]) -> Any:
    """Run a transaction's coroutine to its end on the writer thread, without an event loop:
    every SqliteTx method completes without suspending, so one send() finishes it."""
    try:
        coro.send(None)  # type: ignore[attr-defined]
    except StopIteration as done:
        return done.value
    coro.close()  # type: ignore[attr-defined]
    raise RuntimeError("a storage transaction awaited something other than its tx methods")


class SqliteStorage:
    shared_across_processes = False

    def __init__(self, url: StorageURL, *, target: SchemaTarget | None = None,
                 database: Database | None = None) -> None:
        if not url.is_sqlite:
            raise ValueError(f"not a sqlite: URL: {url}")
        self.url = url
        self.db = database or Database(url.path, target=target)
        self._bus = LocalNoticeBus()
        # run id -> (owner, lease expiry); touched only inside write jobs (the writer thread).
        self._leases: dict[str, tuple[str, int]] = {}

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return self.db.schema_version

    @property
    def bus(self) -> LocalNoticeBus:
        return self._bus

    async def open(self) -> None:
        await self.db.start()

    async def close(self) -> None:
        await self.db.close()

    # -- transactions -----------------------------------------------------------------------
    async def transaction(self, work: Callable[[Any], Awaitable[T]]) -> T:
        notices: list[Notice] = []
        result = await self.db.write(lambda conn: _drive(work(SqliteTx(conn, notices))))
        self._publish(notices)
        return result

    async def once(self, account_id: str, action: str, client_id: str, fingerprint: bytes, now: int,
                   effect: Callable[[Any], Awaitable[Any]]) -> OnceResult:
        fingerprint = bytes(fingerprint)
        notices: list[Notice] = []

        def job(conn: apsw.Connection) -> OnceResult:
            # One write job: the writer thread (and, across processes, the file lock) runs it
            # alone, so a second request with the same id sees the first's record.
            prior = idem_q.idem_get(conn, account_id, action, client_id)
            if prior is not None:
                if bytes(prior[0]) != fingerprint:
                    raise IdempotencyConflict(
                        f"{action} id {client_id!r} was already used with a different request")
                return OnceResult(codec.decode(prior[1]), False)
            response = _drive(effect(SqliteTx(conn, notices)))
            idem_q.idem_put(conn, account_id, action, client_id, fingerprint, codec.encode(response), now)
            return OnceResult(response, True)

        result = await self.db.write(job)
        self._publish(notices)
        return result

    def _publish(self, notices: list[Notice]) -> None:
        for notice in notices:
            self._bus.publish_now(notice)

    # -- reads ------------------------------------------------------------------------------
    async def get_agent(self, agent_id: str) -> dict | None:
        return self.db.read(agents_q.get_agent, agent_id)

    async def get_session(self, session_id: str) -> dict | None:
        return self.db.read(sessions_q.get_session, session_id)

    async def last_seq(self, session_id: str) -> int:
        return self.db.read(events_q.last_seq, session_id)

    async def event_page(self, session_id: str, after_seq: int, limit: int,
                         max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        return self.db.read(events_q.event_bodies_page, session_id, after_seq, limit, max_bytes)

    async def get_run(self, run_id: str) -> dict | None:
        return self.db.read(runs_q.get_run, run_id)

    # -- replay signatures ------------------------------------------------------------------
    async def claim_signature(self, sig: bytes, expires_at: int, now: int) -> bool:
        return await self.db.write(sig_q.claim_signature, bytes(sig), expires_at, now)

    async def prune_signatures(self, now: int) -> int:
        return await self.db.write(sig_q.prune_signatures, now)

    # -- the run queue (single-process leases) ----------------------------------------------
    async def claim_run(self, owner: str, lease_ms: int, now: int) -> dict | None:
        def job(conn: apsw.Connection) -> dict | None:
            row = conn.execute(_CLAIMABLE).fetchone()
            if row is None:
                return None
            run_id, account_id, user_event_id = row
            conn.execute(_TO_RUNNING, (now, run_id))
            info = runs_q.get_run(conn, run_id)
            self._leases[run_id] = (owner, now + lease_ms)
            info["accountId"] = account_id
            if user_event_id is not None:
                info["userEventId"] = user_event_id
            info["leaseOwner"] = owner
            info["leaseExpiresAt"] = now + lease_ms
            return info

        return await self.db.write(job)

    def _holds(self, conn: apsw.Connection, run_id: str, owner: str) -> bool:
        lease = self._leases.get(run_id)
        if lease is None or lease[0] != owner:
            return False
        run = runs_q.get_run(conn, run_id)
        return run is not None and run["status"] == "running"

    async def renew_lease(self, run_id: str, owner: str, lease_ms: int, now: int) -> bool:
        def job(conn: apsw.Connection) -> bool:
            if not self._holds(conn, run_id, owner):
                return False
            self._leases[run_id] = (owner, now + lease_ms)
            return True

        return await self.db.write(job)

    async def requeue_expired(self, now: int) -> list[str]:
        def job(conn: apsw.Connection) -> list[str]:
            running = [rid for (rid,) in conn.execute(
                "SELECT id FROM runs WHERE status = 'running' ORDER BY created_at, rowid")]
            requeued = []
            for run_id in running:
                lease = self._leases.get(run_id)
                if lease is None or lease[1] < now:
                    conn.execute(_TO_QUEUED, (now, run_id))
                    self._leases.pop(run_id, None)
                    requeued.append(run_id)
            return requeued

        return await self.db.write(job)

    async def finish_run(self, run_id: str, owner: str, status: str, error: str | None, now: int) -> dict:
        if status not in ("succeeded", "failed", "canceled"):
            raise ValueError(f"finish_run: {status!r} is not a final status")

        def job(conn: apsw.Connection) -> dict:
            if runs_q.get_run(conn, run_id) is None:
                raise NotFound(f"run {run_id} not found")
            if not self._holds(conn, run_id, owner):
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")
            conn.execute(_TO_FINAL, (status, error, now, run_id))
            self._leases.pop(run_id, None)
            return runs_q.get_run(conn, run_id)

        return await self.db.write(job)


class SqliteTx:
    """The port's transaction handle over the writer connection, inside one write job."""

    def __init__(self, conn: apsw.Connection, notices: list[Notice]) -> None:
        self._conn = conn
        self._notices = notices

    async def ensure_account(self, account_id: str, now: int) -> None:
        ensure_account(self._conn, account_id, now)

    async def create_agent(self, agent_id: str, account_id: str, definition: dict, state_dir: str,
                           now: int) -> dict:
        return agents_q.create_agent(self._conn, agent_id, account_id, definition, state_dir, now)

    async def create_session(self, session_id: str, account_id: str, agent_id: str, title: str | None,
                             now: int) -> dict:
        return sessions_q.create_session(self._conn, session_id, account_id, agent_id, title, now)

    async def set_session_status(self, session_id: str, status: str, now: int) -> dict:
        return sessions_q.set_session_status(self._conn, session_id, status, now)

    async def append_event(self, session_id: str, payload: dict, event_id: str,
                           now: int) -> tuple[dict, bytes]:
        return events_q.append_event(self._conn, session_id, payload, event_id, now)

    async def enqueue_run(self, run_id: str, account_id: str, agent_id: str, session_id: str | None,
                          user_event_id: str | None, now: int) -> dict:
        return runs_q.create_run(self._conn, run_id, account_id, agent_id, session_id, user_event_id, now)

    async def notify(self, notice: Notice) -> None:
        encode_notice(notice)  # refuse an oversized notice here too, inside the transaction
        self._notices.append(notice)

"""The SQLite driver of the storage port: today's store (server.store.*) behind the port.

Every call goes through server.store.database.Database (its schema gate, its reader, its
group-committing writer thread) and the existing query functions, so SQLite keeps its speed
and its file format: nothing here changes the schema.

What SQLite gives across processes: the seq counter, idempotency and replay signatures hold for
several connections on one file (each write is a BEGIN IMMEDIATE transaction; the file lock
orders them). What it does not: the runs table has no lease columns (schema/baseline.sql is the
single-server schema), so run leases live in this object's memory, and notices travel within
this process only. That is single-process
semantics, which is what an embedded SQLite deployment is (`shared_across_processes = False`):
one server owns the file's queue. A run a dead process left 'running' has no lease here, so
`requeue_expired` puts it back in the queue (the same as the runtime's requeue at start).
Status moves go through server.store.runs.move_run, so they stamp what the store stamps.
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

# The oldest queued run whose session has no older queued run and no live one (claimed,
# running, waiting). server.store has no such query (its runtime keeps one worker per session
# instead). The inner WHERE repeats runs.ACTIVE, the partial index's condition, verbatim.
_CLAIMABLE = (
    "SELECT r.id, r.user_event_id, (SELECT s.model_override FROM sessions s WHERE s.id = r.session_id)"
    " FROM runs r WHERE r.status = 'queued'"
    " AND (r.session_id IS NULL OR NOT EXISTS ("
    f" SELECT 1 FROM runs o WHERE o.session_id = r.session_id AND o.{runs_q.ACTIVE}"
    "  AND o.id <> r.id AND (o.status <> 'queued' OR o.created_at < r.created_at"
    "   OR (o.created_at = r.created_at AND o.rowid < r.rowid))))"
    " ORDER BY r.created_at, r.rowid LIMIT 1")
# The statuses that hold a lease (docs/storage.md): a server has the run in hand.
_LEASED = ("claimed", "running")


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
            run_id, user_event_id, override = row
            info = runs_q.move_run(conn, runs_q.get_run(conn, run_id), "running", now)
            assert info is not None  # read and moved in one write job
            self._leases[run_id] = (owner, now + lease_ms)
            if user_event_id is not None:
                info["userEventId"] = user_event_id
            if override is not None:
                info["modelOverride"] = codec.decode(override)
            info["leaseOwner"] = owner
            info["leaseExpiresAt"] = now + lease_ms
            return info

        return await self.db.write(job)

    def _held(self, conn: apsw.Connection, run_id: str, owner: str) -> dict | None:
        """The run if `owner` holds its lease, else None."""
        lease = self._leases.get(run_id)
        if lease is None or lease[0] != owner:
            return None
        run = runs_q.get_run(conn, run_id)
        return run if run is not None and run["status"] in _LEASED else None

    async def renew_lease(self, run_id: str, owner: str, lease_ms: int, now: int) -> bool:
        def job(conn: apsw.Connection) -> bool:
            if self._held(conn, run_id, owner) is None:
                return False
            self._leases[run_id] = (owner, now + lease_ms)
            return True

        return await self.db.write(job)

    async def requeue_expired(self, now: int) -> list[str]:
        def job(conn: apsw.Connection) -> list[str]:
            held = [runs_q.get_run(conn, rid) for (rid,) in conn.execute(
                "SELECT id FROM runs WHERE status IN ('claimed', 'running') ORDER BY created_at, rowid")]
            requeued = []
            for run in held:
                lease = self._leases.get(run["id"])
                if (lease is None or lease[1] < now) and runs_q.move_run(conn, run, "queued", now):
                    self._leases.pop(run["id"], None)
                    requeued.append(run["id"])
            return requeued

        return await self.db.write(job)

    async def finish_run(self, run_id: str, owner: str, status: str, error: dict | None, now: int, *,
                         usage: dict | None = None) -> dict:
        if status not in ("succeeded", "failed", "canceled"):
            raise ValueError(f"finish_run: {status!r} is not a final status")

        def job(conn: apsw.Connection) -> dict:
            if runs_q.get_run(conn, run_id) is None:
                raise NotFound(f"run {run_id} not found")
            run = self._held(conn, run_id, owner)
            if run is None or run["status"] != "running":
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")
            done = runs_q.move_run(conn, run, status, now, error=error, usage=usage)
            assert done is not None  # read and moved in one write job
            self._leases.pop(run_id, None)
            return done

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
                             now: int, *, parent_session_id: str | None = None) -> dict:
        return sessions_q.create_session(self._conn, session_id, account_id, agent_id, title, now,
                                         parent_session_id=parent_session_id)

    async def set_session_status(self, session_id: str, status: str, now: int) -> dict:
        return sessions_q.set_session_status(self._conn, session_id, status, now)

    async def append_event(self, session_id: str, payload: dict, event_id: str,
                           now: int) -> tuple[dict, bytes]:
        return events_q.append_event(self._conn, session_id, payload, event_id, now)

    async def enqueue_run(self, run_id: str, account_id: str, agent_id: str, session_id: str | None,
                          user_event_id: str | None, now: int, *, title: str = "", origin: str = "user",
                          parent: dict | None = None) -> dict:
        return runs_q.create_run(self._conn, run_id, account_id, agent_id, session_id, user_event_id, now,
                                 title=title, origin=origin, parent=parent)

    async def notify(self, notice: Notice) -> None:
        encode_notice(notice)  # refuse an oversized notice here too, inside the transaction
        self._notices.append(notice)

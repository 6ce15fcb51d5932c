"""The storage port: what the server needs from its store, in terms that hold across servers.

Two drivers implement it (server.storage.sqlite over today's apsw store, server.storage.postgres
over psycopg 3), and tests/test_storage_conformance.py runs the same tests against both.

Values are the contract's dicts (SessionInfo, RunInfo, SessionEvent) exactly as server.store
returns them, so handlers keep their shapes whichever driver is underneath.

Writes that must commit together run in one `transaction(work)`: `work(tx)` is an async
function that awaits only `tx` methods. (The SQLite driver runs it on its single writer thread,
where every `tx` method completes without suspending; awaiting anything else there is an error.)
Notices queued with `tx.notify` are delivered only if the transaction commits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

# A notice's encoded size limit: PostgreSQL's NOTIFY payload must stay under 8000 bytes.
MAX_NOTICE_BYTES = 7900


class StorageError(Exception):
    """Base of the port's own refusals."""


class IdempotencyConflict(StorageError):
    """The client id was already used with a different request (the caller answers 409)."""


class LeaseLost(StorageError):
    """This server no longer holds the run's lease: another server owns the run now, or it
    was requeued. The caller must drop its result; the run will be answered by its new owner."""


@dataclass(frozen=True)
class Notice:
    """A small cross-server message: `topic` (e.g. "sessions/<id>") and a JSON-able `data` map.

    Durable events travel as a notice naming the seq; subscribers read the bytes back from the
    database, so replay-then-live keeps its order, no gap and no duplicate. Partials, which are
    never stored, may travel in `data` itself."""

    topic: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Resync:
    """Told to subscribers when notices may have been missed (a lost LISTEN connection that was
    reconnected): each must re-read what it follows from the database past its last seq."""

    reason: str


@dataclass(frozen=True)
class OnceResult:
    """The outcome of an idempotent action: the response and whether this call made the effect
    (False: an earlier call with the same client id did; its response is returned unchanged)."""

    response: Any
    fresh: bool


@runtime_checkable
class NoticeSubscription(Protocol):
    async def get(self) -> Notice | Resync:
        """The next notice (or Resync), in publication order per publisher."""

    async def close(self) -> None: ...


@runtime_checkable
class NoticeBus(Protocol):
    async def publish(self, notice: Notice) -> None:
        """Send now, outside any transaction (partials, account notices)."""

    async def subscribe(self) -> NoticeSubscription:
        """Start receiving every notice published from now on, by any server."""


@runtime_checkable
class StorageTx(Protocol):
    """Writes inside one transaction; each raises server.store.errors.NotFound for a missing row."""

    async def ensure_account(self, account_id: str, now: int) -> None: ...

    async def create_agent(self, agent_id: str, account_id: str, definition: dict, state_dir: str,
                           now: int) -> dict: ...

    async def create_session(self, session_id: str, account_id: str, agent_id: str,
                             title: str | None, now: int, *,
                             parent_session_id: str | None = None) -> dict: ...

    async def set_session_status(self, session_id: str, status: str, now: int) -> dict: ...

    async def append_event(self, session_id: str, payload: dict, event_id: str,
                           now: int) -> tuple[dict, bytes]:
        """(SessionEvent, stored body). seq = the session's counter + 1, bumped in this
        transaction (dense and unique under concurrent writers on every server), with the
        activity rollup of the session and its agent (SessionInfo / AgentInfo `activity`)."""

    async def enqueue_run(self, run_id: str, account_id: str, agent_id: str, session_id: str | None,
                          user_event_id: str | None, now: int, *, title: str = "", origin: str = "user",
                          parent: dict | None = None) -> dict:
        """A queued run (RunInfo): a root, or a child of `parent` (a RunInfo) in its tree."""

    async def notify(self, notice: Notice) -> None:
        """Publish `notice` when (and only if) this transaction commits."""


@runtime_checkable
class StoragePort(Protocol):
    # True when run leases and notices hold across server processes (PostgreSQL); False for
    # an embedded store that one server process owns (SQLite: leases and notices in memory).
    shared_across_processes: bool

    # -- lifecycle and the schema gate ------------------------------------------------------
    async def open(self) -> None:
        """Pass the schema gate (create / migrate in one transaction / refuse with
        server.store.gate.SchemaGateError naming both versions), then accept calls."""

    async def close(self) -> None: ...

    @property
    def schema_version(self) -> int: ...

    @property
    def bus(self) -> NoticeBus: ...

    # -- transactions -----------------------------------------------------------------------
    async def transaction(self, work: Callable[[StorageTx], Awaitable[T]]) -> T:
        """Run `work(tx)` in one transaction; its result once committed. An exception rolls
        everything back and propagates."""

    async def once(self, account_id: str, action: str, client_id: str, fingerprint: bytes, now: int,
                   effect: Callable[[StorageTx], Awaitable[Any]]) -> OnceResult:
        """At most one effect per (account, action, client id), across servers: the record and
        the effect commit in one transaction, under a unique key. A repeat with the same
        fingerprint returns the first response (fresh=False); a different one raises
        IdempotencyConflict. `effect` returns the response (a DAG-CBOR-able value)."""

    # -- reads ------------------------------------------------------------------------------
    async def get_agent(self, agent_id: str) -> dict | None: ...

    async def get_session(self, session_id: str) -> dict | None: ...

    async def last_seq(self, session_id: str) -> int: ...

    async def event_page(self, session_id: str, after_seq: int, limit: int,
                         max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        """[(seq, body)] with seq > after_seq ascending, at most `limit` rows, stopping once the
        bodies pass `max_bytes` (at least one row); and whether more events exist past it."""

    async def get_run(self, run_id: str) -> dict | None: ...

    # -- replay signatures (CONTRACT section 2, step 6) -------------------------------------
    async def claim_signature(self, sig: bytes, expires_at: int, now: int) -> bool:
        """True if newly claimed; False while an unexpired claim exists (on any server)."""

    async def prune_signatures(self, now: int) -> int: ...

    # -- the run queue ----------------------------------------------------------------------
    async def claim_run(self, owner: str, lease_ms: int, now: int) -> dict | None:
        """Take the oldest queued run whose session has no older queued run and no live one
        (claimed, running, waiting): it becomes 'running' as server.store.runs.transition moves
        it (attempt + 1, startedAt the first time, error cleared) with `owner`'s lease until
        now + lease_ms. Two claimers never get the same run. The RunInfo gets "leaseOwner",
        "leaseExpiresAt", and as server.store.runs.queued_runs gives them, "userEventId" and the
        session's "modelOverride" when set. None when nothing is claimable."""

    async def renew_lease(self, run_id: str, owner: str, lease_ms: int, now: int) -> bool:
        """Extend the lease to now + lease_ms; False if `owner` no longer holds the run."""

    async def requeue_expired(self, now: int) -> list[str]:
        """Claimed or running runs whose lease ran out go back to 'queued' (oldest first); their
        ids. (Only those two statuses hold a lease; a waiting run is parked, held by nobody.)"""

    async def finish_run(self, run_id: str, owner: str, status: str, error: dict | None,
                         now: int, *, usage: dict | None = None) -> dict:
        """Move a running run to succeeded / failed / canceled, once, as
        server.store.runs.transition does (finishedAt; `error` {code, message} only on 'failed',
        a default one if None; `usage` replaced when given): raises LeaseLost when `owner` no
        longer holds it (its lease was taken over, or it was already finished)."""

"""The PostgreSQL driver of the storage port: psycopg 3 with psycopg_pool (chosen by
measurement: bench/pg_driver.py, docs/storage.md).

Every pooled connection is in autocommit mode: a read is one round trip, and each write opens
its own transaction (`conn.transaction()`), at PostgreSQL's default READ COMMITTED. What must
hold across servers is held by the database itself:

- seq: `UPDATE sessions SET last_seq = last_seq + 1 ... RETURNING` in the event's transaction;
  the row lock orders concurrent appenders on every server, a rollback gives the number back;
- idempotency: the record's primary key is inserted first (ON CONFLICT DO NOTHING waits for a
  racing transaction with the same key and then sees its commit), so one effect wins;
- replay signatures: an upsert on the signature's primary key that takes over only expired rows;
- runs: `FOR UPDATE SKIP LOCKED` picks a queued run no other claimer holds, a lease
  (`lease_owner`, `lease_expires_at`) names the server running it, and every later change
  checks the lease in its WHERE, so a server that lost its run cannot finish it.

Rows become the contract's dicts through server.store's own row functions (sessions.session_info,
runs.run_info, agents.agent_info): the column lists below follow theirs, so both drivers return
the same shapes (tests/test_storage_conformance.py compares them), and status moves stamp the
fields server.store.runs.transition stamps.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool

from server.storage.notices import encode_notice
from server.storage.pg_bus import PgNoticeBus, channel_for
from server.storage.pg_gate import PgSchemaGateError, PgSchemaTarget, pass_gate
from server.storage.port import IdempotencyConflict, LeaseLost, Notice, OnceResult, StorageError, T
from server.storage.url import StorageURL, scrub
from server.store import codec
from server.store.agents import agent_info
from server.store.errors import NotFound
from server.store.events import activity_of
from server.store.runs import run_info, tree_position
from server.store.sessions import session_info

# The columns of server.store's row functions, in their order (PostgreSQL spellings).
_LIVE = "('queued', 'claimed', 'running', 'waiting')"
_SESSION = ("id, account_id, agent_id, title, status, created_at, updated_at, parent_session_id,"
            " run_id, model_override, description, message_at, message_from,"
            " (SELECT count(*) FROM sessions c WHERE c.parent_session_id = sessions.id)")
_RUN = ("id, account_id, root_run_id, parent_run_id, depth, kind, agent_id, session_id, origin,"
        " title, status, attempt, created_at, updated_at, started_at, finished_at, usage,"
        " error_code, error")
_RUN_N = 19
_AGENT = ("id, account_id, definition, state_dir, status, created_at, updated_at, public_read,"
          " activity_at, activity_kind, activity_session_id, message_at, message_from,"
          f" EXISTS (SELECT 1 FROM runs WHERE runs.agent_id = agents.id AND runs.status IN {_LIVE})")
_CLAIM_RETRIES = 5
# RunInfo.error of a run failed without a reason (server.store.runs.transition's default).
_DEFAULT_ERROR = {"code": "run-failed", "message": "the run failed"}


class StorageUnavailable(StorageError):
    """The database cannot be reached; the message names the redacted URL only."""


class PostgresStorage:
    shared_across_processes = True

    def __init__(self, url: StorageURL, *, pool_size: int = 10, connect_timeout: float = 10.0,
                 target: PgSchemaTarget | None = None) -> None:
        if not url.is_postgresql:
            raise ValueError(f"not a postgresql:// URL: {url}")
        self.url = url
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._target = target or PgSchemaTarget.current()
        self._pool: AsyncConnectionPool | None = None
        self._bus: PgNoticeBus | None = None
        self._version = 0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return self._version

    @property
    def bus(self) -> PgNoticeBus:
        if self._bus is None:
            raise StorageError("storage is not open")
        return self._bus

    async def open(self) -> None:
        dsn = self.url.dsn()
        try:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                         connect_timeout=max(1, int(self._connect_timeout)))
        except psycopg.Error as exc:
            raise StorageUnavailable(f"cannot connect to {self.url}: {_scrub(exc, self.url)}") from None
        try:
            self._version = await pass_gate(conn, str(self.url), self._target)
            cur = await conn.execute("SELECT current_database(), current_schema()")
            database, schema = await cur.fetchone()
        finally:
            await conn.close()
        pool = AsyncConnectionPool(dsn, min_size=1, max_size=self._pool_size, open=False,
                                   kwargs={"autocommit": True,
                                           "connect_timeout": max(1, int(self._connect_timeout))},
                                   name="seed-agents")
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            await pool.close()
            raise StorageUnavailable(f"cannot open a connection pool to {self.url}: {type(exc).__name__}") from None
        self._pool = pool
        self._bus = PgNoticeBus(dsn, channel_for(database, schema), pool, display=str(self.url))

    async def close(self) -> None:
        if self._bus is not None:
            await self._bus.close()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _p(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise StorageError("storage is not open")
        return self._pool

    # -- transactions -----------------------------------------------------------------------
    async def transaction(self, work: Callable[[Any], Awaitable[T]]) -> T:
        async with self._p().connection() as conn:
            async with conn.transaction():
                return await work(PgTx(conn, self._bus.channel))

    async def once(self, account_id: str, action: str, client_id: str, fingerprint: bytes, now: int,
                   effect: Callable[[Any], Awaitable[Any]]) -> OnceResult:
        fingerprint = bytes(fingerprint)
        key = (account_id, action, client_id)
        async with self._p().connection() as conn:
            async with conn.transaction():
                # Claim the key first: a racing transaction with the same key waits here until
                # ours ends, then sees our record (or, if we rolled back, claims it itself).
                cur = await conn.execute(
                    "INSERT INTO idempotency (account_id, action, client_id, fingerprint, response, created_at)"
                    " VALUES (%s, %s, %s, %s, ''::bytea, %s) ON CONFLICT DO NOTHING RETURNING 1",
                    (*key, fingerprint, now))
                if await cur.fetchone() is None:
                    cur = await conn.execute(
                        "SELECT fingerprint, response FROM idempotency"
                        " WHERE account_id = %s AND action = %s AND client_id = %s", key)
                    row = await cur.fetchone()
                    if row is None:
                        raise StorageError("idempotency record vanished during a race")
                    if bytes(row[0]) != fingerprint:
                        raise IdempotencyConflict(
                            f"{action} id {client_id!r} was already used with a different request")
                    return OnceResult(codec.decode(row[1]), False)
                response = await effect(PgTx(conn, self._bus.channel))
                await conn.execute(
                    "UPDATE idempotency SET response = %s WHERE account_id = %s AND action = %s AND client_id = %s",
                    (codec.encode(response), *key))
                return OnceResult(response, True)

    # -- reads ------------------------------------------------------------------------------
    async def _one(self, query: str, params: tuple) -> tuple | None:
        async with self._p().connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchone()

    async def get_session(self, session_id: str) -> dict | None:
        row = await self._one(f"SELECT {_SESSION} FROM sessions WHERE id = %s", (session_id,))
        return None if row is None else session_info(row)

    async def get_agent(self, agent_id: str) -> dict | None:
        row = await self._one(f"SELECT {_AGENT} FROM agents WHERE id = %s", (agent_id,))
        return None if row is None else agent_info(row)

    async def last_seq(self, session_id: str) -> int:
        row = await self._one("SELECT last_seq FROM sessions WHERE id = %s", (session_id,))
        return 0 if row is None else row[0]

    async def event_page(self, session_id: str, after_seq: int, limit: int,
                         max_bytes: int) -> tuple[list[tuple[int, bytes]], bool]:
        # The running total is computed from the stored lengths (no body is detoasted for it);
        # bodies past the byte bound come back as NULL, so a page never ships more than it keeps.
        async with self._p().connection() as conn:
            # Binary results: bodies arrive as raw bytes, not hex text to decode.
            cur = await conn.cursor(binary=True).execute(
                "SELECT seq, CASE WHEN n = 1 OR total <= %s THEN body END FROM ("
                " SELECT seq, body, row_number() OVER w AS n, sum(octet_length(body)) OVER w AS total"
                " FROM session_events WHERE session_id = %s AND seq > %s"
                " WINDOW w AS (ORDER BY seq) ORDER BY seq LIMIT %s) page ORDER BY seq",
                (max_bytes, session_id, after_seq, limit + 1))
            rows = await cur.fetchall()
        kept = []
        for seq, body in rows[:limit]:
            if body is None:
                break
            kept.append((seq, bytes(body)))
        return kept, len(rows) > len(kept)

    async def get_run(self, run_id: str) -> dict | None:
        row = await self._one(f"SELECT {_RUN} FROM runs WHERE id = %s", (run_id,))
        return None if row is None else run_info(row)

    # -- replay signatures ------------------------------------------------------------------
    async def claim_signature(self, sig: bytes, expires_at: int, now: int) -> bool:
        row = await self._one(
            "INSERT INTO accepted_signatures (sig, expires_at) VALUES (%s, %s)"
            " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
            " WHERE accepted_signatures.expires_at < %s RETURNING 1",
            (bytes(sig), expires_at, now))
        return row is not None

    async def prune_signatures(self, now: int) -> int:
        async with self._p().connection() as conn:
            cur = await conn.execute("DELETE FROM accepted_signatures WHERE expires_at < %s", (now,))
            return cur.rowcount

    # -- the run queue ----------------------------------------------------------------------
    async def claim_run(self, owner: str, lease_ms: int, now: int) -> dict | None:
        for _ in range(_CLAIM_RETRIES):
            try:
                row = await self._one(_CLAIM_SQL, (now, owner, now + lease_ms, now))
            except pg_errors.UniqueViolation:
                # Another server started this session's older run a moment ago (the one-live
                # index caught it): pick again.
                continue
            if row is None:
                return None
            return _claimed(row)
        return None

    async def renew_lease(self, run_id: str, owner: str, lease_ms: int, now: int) -> bool:
        row = await self._one(
            "UPDATE runs SET lease_expires_at = %s WHERE id = %s AND status IN ('claimed', 'running')"
            " AND lease_owner = %s RETURNING 1", (now + lease_ms, run_id, owner))
        return row is not None

    async def requeue_expired(self, now: int) -> list[str]:
        async with self._p().connection() as conn:
            cur = await conn.execute(
                "WITH gone AS (SELECT id FROM runs WHERE status IN ('claimed', 'running')"
                "  AND lease_expires_at < %s FOR UPDATE SKIP LOCKED)"
                " UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL,"
                " error_code = NULL, error = NULL, updated_at = GREATEST(updated_at, %s)"
                " FROM gone WHERE runs.id = gone.id"
                " RETURNING runs.id, runs.created_at, runs.pos", (now, now))
            rows = await cur.fetchall()
        return [r[0] for r in sorted(rows, key=lambda r: (r[1], r[2]))]

    async def finish_run(self, run_id: str, owner: str, status: str, error: dict | None, now: int, *,
                         usage: dict | None = None) -> dict:
        if status not in ("succeeded", "failed", "canceled"):
            raise ValueError(f"finish_run: {status!r} is not a final status")
        # As server.store.runs.transition: an error only on 'failed' (a default one if none
        # given), finishedAt stamped, usage replaced when given.
        err = (error or _DEFAULT_ERROR) if status == "failed" else None
        row = await self._one(
            f"UPDATE runs SET status = %s, error_code = %s, error = %s, finished_at = %s,"
            f" usage = coalesce(%s, usage), lease_owner = NULL, lease_expires_at = NULL,"
            f" updated_at = GREATEST(updated_at, %s)"
            f" WHERE id = %s AND status = 'running' AND lease_owner = %s RETURNING {_RUN}",
            (status, None if err is None else err["code"], None if err is None else err["message"], now,
             None if usage is None else codec.encode(usage), now, run_id, owner))
        if row is None:
            if await self.get_run(run_id) is None:
                raise NotFound(f"run {run_id} not found")
            raise LeaseLost(f"run {run_id} is no longer held by {owner}")
        return run_info(row)


# The oldest queued run whose session has no older queued run and no live one (claimed, running
# or waiting), locked so no other claimer takes it (SKIP LOCKED moves on to the next candidate
# instead of waiting). Entering 'running' is server.store.runs.transition's: an attempt counted,
# startedAt stamped the first time, the error cleared.
_CLAIM_SQL = f"""
WITH pick AS (
    SELECT r.id FROM runs r
    WHERE r.status = 'queued'
      AND (r.session_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM runs o
          WHERE o.session_id = r.session_id AND o.status IN {_LIVE} AND o.id <> r.id
            AND (o.status <> 'queued' OR (o.created_at, o.pos) < (r.created_at, r.pos))))
    ORDER BY r.created_at, r.pos
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
UPDATE runs SET status = 'running', attempt = attempt + 1, started_at = coalesce(started_at, %s),
       error_code = NULL, error = NULL, lease_owner = %s, lease_expires_at = %s,
       updated_at = GREATEST(updated_at, %s)
FROM pick WHERE runs.id = pick.id
RETURNING {', '.join('runs.' + c for c in _RUN.split(', '))}, runs.user_event_id,
          (SELECT s.model_override FROM sessions s WHERE s.id = runs.session_id),
          runs.lease_owner, runs.lease_expires_at
"""


def _claimed(row: tuple) -> dict:
    """RunInfo plus the runtime's keys, as server.store.runs.queued_runs gives them (userEventId,
    the session's modelOverride), and the lease."""
    info = run_info(row[:_RUN_N])
    user_event_id, override, lease_owner, lease_expires_at = row[_RUN_N:]
    if user_event_id is not None:
        info["userEventId"] = user_event_id
    if override is not None:
        info["modelOverride"] = codec.decode(override)
    info["leaseOwner"] = lease_owner
    info["leaseExpiresAt"] = lease_expires_at
    return info


class PgTx:
    """The port's transaction handle over one pooled connection inside `conn.transaction()`."""

    def __init__(self, conn: psycopg.AsyncConnection, channel: str) -> None:
        self._conn = conn
        self._channel = channel

    async def _one(self, query: str, params: tuple) -> tuple | None:
        cur = await self._conn.execute(query, params)
        return await cur.fetchone()

    async def ensure_account(self, account_id: str, now: int) -> None:
        await self._conn.execute(
            "INSERT INTO accounts (id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING", (account_id, now))

    async def create_agent(self, agent_id: str, account_id: str, definition: dict, state_dir: str,
                           now: int) -> dict:
        await self._conn.execute(
            "INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, 'idle', %s, %s)",
            (agent_id, account_id, codec.encode(definition), state_dir, now, now))
        return agent_info((agent_id, account_id, definition, state_dir, "idle", now, now, False,
                           None, None, None, None, None, False))

    async def create_session(self, session_id: str, account_id: str, agent_id: str, title: str | None,
                             now: int, *, parent_session_id: str | None = None) -> dict:
        await self._conn.execute(
            "INSERT INTO sessions (id, account_id, agent_id, title, status, created_at, updated_at,"
            " parent_session_id) VALUES (%s, %s, %s, %s, 'idle', %s, %s, %s)",
            (session_id, account_id, agent_id, title, now, now, parent_session_id))
        return session_info((session_id, account_id, agent_id, title, "idle", now, now, parent_session_id,
                             None, None, None, None, None, 0))

    async def set_session_status(self, session_id: str, status: str, now: int) -> dict:
        row = await self._one(
            f"UPDATE sessions SET status = %s, updated_at = GREATEST(updated_at, %s) WHERE id = %s"
            f" RETURNING {_SESSION}", (status, now, session_id))
        if row is None:
            raise NotFound(f"session {session_id} not found")
        return session_info(row)

    async def append_event(self, session_id: str, payload: dict, event_id: str,
                           now: int) -> tuple[dict, bytes]:
        # As server.store.events.append_event: the seq and the session's latest message (messages
        # only), then the event and its agent's latest activity (every event). The agent's row is
        # shared by all its sessions, so its lock is taken last, in the statement before COMMIT:
        # appends to one agent's sessions wait on each other only for the commit itself.
        kind, message_from = activity_of(payload)
        row = await self._one(
            "UPDATE sessions SET last_seq = last_seq + 1, updated_at = GREATEST(updated_at, %(now)s),"
            " message_at = CASE WHEN %(from)s::text IS NULL THEN message_at"
            "  ELSE GREATEST(coalesce(message_at, 0), %(now)s) END,"
            " message_from = coalesce(%(from)s::text, message_from)"
            " WHERE id = %(sid)s RETURNING last_seq, agent_id",
            {"now": now, "from": message_from, "sid": session_id})
        if row is None:
            raise NotFound(f"session {session_id} not found")
        seq, agent_id = row
        event = {"id": event_id, "sessionId": session_id, "seq": seq, "event": payload, "createdAt": now}
        body = codec.encode(event)
        await self._conn.execute(
            "WITH e AS (INSERT INTO session_events (session_id, seq, id, created_at, body)"
            "  VALUES (%(sid)s, %(seq)s, %(eid)s, %(now)s, %(body)s))"
            " UPDATE agents SET activity_at = GREATEST(coalesce(activity_at, 0), %(now)s),"
            " activity_kind = %(kind)s,"
            " activity_session_id = CASE WHEN %(from)s::text IS NULL THEN activity_session_id ELSE %(sid)s END,"
            " message_at = CASE WHEN %(from)s::text IS NULL THEN message_at"
            "  ELSE GREATEST(coalesce(message_at, 0), %(now)s) END,"
            " message_from = coalesce(%(from)s::text, message_from)"
            " WHERE id = %(agent)s",
            {"sid": session_id, "seq": seq, "eid": event_id, "now": now, "body": body, "kind": kind,
             "from": message_from, "agent": agent_id})
        return event, body

    async def enqueue_run(self, run_id: str, account_id: str, agent_id: str, session_id: str | None,
                          user_event_id: str | None, now: int, *, title: str = "", origin: str = "user",
                          parent: dict | None = None) -> dict:
        root, parent_id, depth = tree_position(run_id, parent)
        await self._conn.execute(
            "INSERT INTO runs (id, account_id, agent_id, session_id, user_event_id, status, attempt,"
            " created_at, updated_at, root_run_id, parent_run_id, depth, kind, origin, title)"
            " VALUES (%s, %s, %s, %s, %s, 'queued', 0, %s, %s, %s, %s, %s, 'agent', %s, %s)",
            (run_id, account_id, agent_id, session_id, user_event_id, now, now, root, parent_id, depth,
             origin, title))
        return run_info((run_id, account_id, root, parent_id, depth, "agent", agent_id, session_id, origin,
                         title, "queued", 0, now, now, None, None, None, None, None))

    async def notify(self, notice: Notice) -> None:
        # NOTIFY inside the transaction: PostgreSQL delivers it at commit, and never on rollback.
        await self._conn.execute("SELECT pg_notify(%s, %s)", (self._channel, encode_notice(notice)))


def _scrub(exc: BaseException, url: StorageURL) -> str:
    """An error's first line with the URL's password (if any) cut out, to be safe."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text, url)


__all__ = ["PostgresStorage", "PgTx", "StorageUnavailable", "PgSchemaGateError"]

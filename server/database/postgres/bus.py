"""Notices across servers through PostgreSQL LISTEN/NOTIFY.

Each server keeps one LISTEN connection (outside the pool) and fans what arrives out to its
subscriptions. A notice is small (seed_agents.server.database.notices.encode_notice); durable events are
read back from the database, so NOTIFY only says "look".

When the LISTEN connection is lost (server restart, pg_terminate_backend, a network cut seen
by the periodic check), the listener reconnects with backoff, LISTENs again, and only then
hands every subscription a Resync: notices sent while it was away are gone, and the subscriber
fills the gap from the database, past its last seq. Listening again before the Resync means
nothing published after the re-read can be missed.

Sending: through the pool when one is given (seed_agents.server.database.postgres), else on one sending
connection of the bus's own (`send`, used by server/live/cluster.py), which reconnects and sends again
what a lost connection may not have delivered (receivers tolerate a repeat, never a loss). That
connection commits without waiting for the WAL flush (`synchronous_commit = off`, for it alone):
a notice stores nothing, and what it names committed durably before it was sent.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging

import psycopg
from psycopg import sql

from ..errors import StorageError
from ..notices import DEFAULT_MAX_PENDING, Notice, Resync, Subscription, decode_notice, encode_notice

log = logging.getLogger(__name__)

# How often an idle LISTEN connection is checked with a query (a dead peer may send no RST).
CHECK_INTERVAL_S = 10.0
RECONNECT_MAX_S = 2.0
# How long subscribe() waits for the first LISTEN before it reports the database unreachable.
SUBSCRIBE_TIMEOUT_S = 15.0


def channel_for(database: str, schema: str) -> str:
    """One channel per (database, schema): NOTIFY channels are per database, and two
    deployments (or two tests) in separate schemas of one database must not hear each other."""
    digest = hashlib.sha256(f"{database}\0{schema}".encode()).hexdigest()[:24]
    return f"seed_agents_{digest}"


# Every payload of a batch, in order, in one statement (its own transaction: delivered together).
_NOTIFY_ALL = "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p"


class PgNoticeBus:
    def __init__(self, dsn: str, channel: str, pool=None, *, display: str,
                 max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self._dsn = dsn
        self._display = display
        self.channel = channel
        self._pool = pool
        self._subs: set[Subscription] = set()
        self._max_pending = max_pending
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self._conn: psycopg.AsyncConnection | None = None
        self.listener_pid: int | None = None  # the LISTEN backend (tests terminate it)
        self.reconnects = 0
        self._sender: psycopg.AsyncConnection | None = None
        self._send_lock = asyncio.Lock()

    async def publish(self, notice: Notice) -> None:
        payload = encode_notice(notice)
        if self._pool is None:
            await self.send([payload])
            return
        async with self._pool.connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))

    async def send(self, payloads: list[str]) -> None:
        """NOTIFY each payload (already encoded, each under the size limit), in order, in one
        statement: one round trip for the batch, delivered together. A lost
        connection is replaced and the batch sent again (a repeat is harmless to receivers)."""
        delay = 0.05
        async with self._send_lock:   # one sender at a time keeps the order
            while True:
                try:
                    if self._sender is None or self._sender.closed:
                        self._sender = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
                        # A NOTIFY's transaction takes a transaction id, so its commit would wait
                        # for a WAL flush like a write's: a few ms on every cross-server delivery
                        # for nothing, since it stores nothing (a notice is lost on a database
                        # crash either way; listeners resync from what is durable).
                        await self._sender.execute("SET synchronous_commit = off")
                    # One statement in autocommit: one round trip (where BEGIN, the NOTIFYs
                    # and COMMIT were three); unnest gives the payloads in array order.
                    await self._sender.execute(_NOTIFY_ALL, (self.channel, payloads))
                    return
                except psycopg.Error as exc:
                    log.warning("sending notices on %s failed (%s); retrying in %.2fs",
                                self._display, type(exc).__name__, delay)
                    sender, self._sender = self._sender, None
                    if sender is not None:
                        try:
                            await sender.close()
                        except Exception:  # closing a broken connection may itself fail
                            pass
                    await asyncio.sleep(delay)  # backoff between attempts
                    delay = min(delay * 2, RECONNECT_MAX_S)

    async def subscribe(self) -> Subscription:
        sub = Subscription(self._subs.discard, self._max_pending)
        self._subs.add(sub)
        if self._task is None:
            self._task = asyncio.create_task(self._listen_forever(), name=f"listen:{self.channel}")
        # Returning only once LISTEN is active: what is published after this is received.
        try:
            await asyncio.wait_for(self._ready.wait(), SUBSCRIBE_TIMEOUT_S)
        except asyncio.TimeoutError:
            await sub.close()
            raise StorageError(f"cannot LISTEN on {self._display}: the database is unreachable") from None
        return sub

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        for sub in list(self._subs):
            await sub.close()
        sender, self._sender = self._sender, None
        if sender is not None:
            try:
                await sender.close()
            except Exception:  # already broken
                pass

    def _fan_out(self, item: Notice | Resync) -> None:
        for sub in list(self._subs):
            sub.deliver(item)

    async def _listen_forever(self) -> None:
        delay = 0.05
        first = True
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            except psycopg.Error as exc:
                log.warning("LISTEN connection to %s failed (%s); retrying in %.2fs",
                            self._display, type(exc).__name__, delay)
                await asyncio.sleep(delay)  # backoff between reconnect attempts
                delay = min(delay * 2, RECONNECT_MAX_S)
                continue
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self._conn = conn
                self.listener_pid = conn.info.backend_pid
                if not first:
                    self.reconnects += 1
                    log.warning("LISTEN connection to %s re-established; subscribers re-read from the database",
                                self._display)
                    self._fan_out(Resync("the LISTEN connection was lost and re-established"))
                first = False
                delay = 0.05
                self._ready.set()
                while True:
                    async for n in conn.notifies(timeout=CHECK_INTERVAL_S):
                        try:
                            self._fan_out(decode_notice(n.payload))
                        except (ValueError, KeyError, TypeError):
                            log.warning("ignored a malformed notice on %s", self.channel)
                    await conn.execute("SELECT 1")  # quiet for a while: is the peer still there?
            except psycopg.Error as exc:  # OperationalError for a lost peer; any other: start over too
                log.warning("LISTEN connection to %s lost (%s); reconnecting", self._display, type(exc).__name__)
            finally:
                self._conn = None
                try:
                    await conn.close()
                except Exception:  # closing a broken connection may itself fail
                    pass

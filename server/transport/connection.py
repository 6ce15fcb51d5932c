"""One WebSocket connection: its framing (v1 or v2, picked once when the socket opens), account
binding, in-flight cap. It only moves frames: reading a client frame and building every server
frame belong to the framing (protocol/wire/framing_v1.py, protocol/wire/framing_v2.py), and its
subscriptions to server/live/streams.py, which sees each answered action first; this module
names no action."""
from __future__ import annotations

import asyncio
import itertools
import logging

from websockets.exceptions import ConnectionClosed

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.framing_types import Refusal, Request, Unsubscribe
from seed_agents.protocol.wire.framing_v1 import V1Framing
from seed_agents.protocol.wire.framing_v2 import SUBPROTOCOL as V2
from seed_agents.protocol.wire.framing_v2 import V2Framing
from seed_agents.protocol.wire.v2 import peek_action_name
from seed_agents.protocol.wire.ws_frame import ws_frame

from ..live.frames import Outgoing
from ..live.streams import Streams
from ..ratelimit import TokenBucket
from ..routes import INLINE_ACTIONS
from ..verification.dispatch import error, execute
from . import memtrim
from .outbound import Outbound

log = logging.getLogger("seed_agents.connection")

__all__ = ["V2", "Connection", "framing_for", "new_connection_id"]

# A socket whose frames keep failing verification (or are not requests at all) is closed 1008:
# more than `--max-unverified` of them, a tenth of which refills per second. A client that signs
# correctly never comes near it; each of those frames also costs the socket's own rate bucket.
JUNK_CLOSE_REASON = "too many frames that failed verification"
# A socket costs a connection slot from its first byte: one that has not acted (a verified
# action binds it to its account) within --first-action-timeout is closed, pings answered or not.
NO_ACTION_REASON = "no verified action in time"
# One numbering for WebSocket and HTTP connections: the replay rule tells them apart by id.
new_connection_id = itertools.count(1).__next__


def framing_for(subprotocol: str | None, limits) -> V1Framing | V2Framing:
    if subprotocol == V2:
        return V2Framing(limits.max_frame, limits.max_depth)
    return V1Framing(limits.max_frame)


class Connection:
    def __init__(self, app, ws) -> None:
        self.id = new_connection_id()
        self.app = app
        self.inline_reads = not app.db.shared
        self.ws = ws
        limits = app.config.limits
        self.framing = framing_for(ws.subprotocol, limits)
        self.account_id: str | None = None
        self.streams = Streams(app, self)   # its subscriptions (server/live/streams.py)
        self.outbound = Outbound(ws, max_bytes=limits.outbound_queue_bytes,
                                 slow_close_timeout=app.config.slow_close_timeout,
                                 on_cut_off=self._on_slow_consumer)
        self.inflight = asyncio.Semaphore(limits.inflight_per_socket)
        self.own_bucket = TokenBucket(limits.rate_per_second, limits.rate_burst, app.rate_clock)   # every frame
        # failed verification
        self.junk = TokenBucket(limits.unverified_burst / 10, limits.unverified_burst, app.rate_clock)
        self.tasks: set[asyncio.Task] = set()
        self.close_after_answer: tuple[int, str] | None = None   # a limit's close, after its Error
        self._first_action: asyncio.TimerHandle | None = None
        self.signers: set[str] = set()   # keys whose verified actions came on this socket

    @property
    def subs(self) -> dict:
        """Its subscriptions by key."""
        return self.streams.subs

    @property
    def transport(self) -> str:
        """"v1" or "v2", for the access log."""
        return self.framing.name

    # -- output ----------------------------------------------------------------------------
    def send_event(self, event: Outgoing, *, bounded: bool = True, track: bool = True) -> None:
        """Live events are bounded (past the bound the socket is cut off); a replay's own
        frames are not, since the replay paces itself with `wait_room`. `track=False`: the
        append does not count as sent on its session's stream (the slow-consumer reason names
        only what a `sessions/` subscription sent, so resuming from it loses nothing)."""
        self.outbound.put(event.frame(self.framing), event.key, event.seq if track else 0,
                          bounded=bounded)

    def send(self, message: bytes | str | None, *, bounded: bool = True) -> None:
        """A response or notice, bounded like events (and the reader stops reading a socket
        whose queue is past its low-water mark); `bounded=False`: part of a replay, which paces
        itself with `wait_room`."""
        if message is None:
            return
        self.outbound.put_answer(ws_frame(message), bounded=bounded)
        if self.close_after_answer is not None:
            self.outbound.close_after_queued(*self.close_after_answer)

    # -- account binding -------------------------------------------------------------------
    def check_bind(self, account_id: str) -> None:
        """May this socket act for `account_id`? Raises the refusal; binds nothing (the socket
        binds only once the action has passed every verification step: `bind_account`)."""
        if self.account_id == account_id:
            return
        if self.account_id is not None:
            # Never the "Signer is not authorized" text: desktops answer that with RegisterSigner.
            raise ProtocolError(403, f"WebSocket account switch is not allowed: this connection acts for "
                                     f"account {self.account_id}; open another connection for account "
                                     f"{account_id}")
        limit = self.app.config.limits.sockets_per_account
        count = self.app.sockets_by_account.get(account_id, 0)
        if count >= limit:
            # The 429 goes out first, then the close (a close sent at once would overtake it).
            self.close_after_answer = (1008, f"too many connections for this account (limit {limit})")
            raise ProtocolError(429, f"too many connections for this account (limit {limit})")

    def bind_account(self, account_id: str) -> None:
        """Bind after `check_bind` passed (with no await since, so it still holds)."""
        if self.account_id == account_id:
            return
        self.app.sockets_by_account[account_id] = self.app.sockets_by_account.get(account_id, 0) + 1
        self.account_id = account_id
        if self._first_action is not None:
            self._first_action.cancel()
            self._first_action = None

    def unbind_account(self) -> None:
        """Undo the bind of an action then refused as a replay (its claim made by its handler:
        server/store/handed_claim.py): the socket counts for no account again, and must act
        for one within the first-action timeout, as a new socket must."""
        if self.account_id is None:
            return
        left = self.app.sockets_by_account.get(self.account_id, 1) - 1
        if left > 0:
            self.app.sockets_by_account[self.account_id] = left
        else:
            self.app.sockets_by_account.pop(self.account_id, None)
        self.account_id = None
        timeout = self.app.config.first_action_timeout
        if timeout and timeout > 0 and self._first_action is None and not self.outbound.closed:
            self._first_action = asyncio.get_running_loop().call_later(timeout, self._no_first_action)

    # -- lifecycle -------------------------------------------------------------------------
    async def serve(self) -> None:
        app = self.app
        app.connections.add(self)
        app.metrics.connections.labels(self.framing.name).inc()
        timeout = app.config.first_action_timeout
        if timeout and timeout > 0:
            self._first_action = asyncio.get_running_loop().call_later(timeout, self._no_first_action)
        try:
            self.send(self.framing.connected(app.now_ms()))
            async for message in self.ws:
                await self.outbound.wait_room()  # a client that does not read stops being read
                if self.outbound.closed:
                    break
                if len(message) > self.app.config.limits.max_frame:   # an upload chunk (server/verification/upload_gate.py)
                    async with self.app.upload_gate.slot(self.app.now_ms()):
                        await self._on_frame(message)
                else:
                    await self._on_frame(message)
                del message   # answered: not kept while the next message is awaited (a chunk is megabytes)
        except ConnectionClosed:
            pass   # the peer went away, or was dropped (write timeout, slow consumer)
        except Exception:  # noqa: BLE001 - logged; the socket is closed by the transport
            log.exception("connection %s failed", self.id)
        finally:
            await self._cleanup()

    async def drain_inflight(self) -> None:
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    def close_for(self, code: int, reason: str) -> None:
        """Close after what is already queued (e.g. the signer it acted with was unregistered)."""
        self.outbound.close_after_queued(code, reason)

    def _no_first_action(self) -> None:
        self._first_action = None
        if self.account_id is None and not self.outbound.closed:
            self.outbound.close_after_queued(1008, NO_ACTION_REASON)

    async def _cleanup(self) -> None:
        app = self.app
        if self._first_action is not None:
            self._first_action.cancel()
            self._first_action = None
        app.connections.discard(self)
        app.metrics.connections.labels(self.framing.name).dec()
        self._on_cut_off()
        for task in list(self.tasks):
            task.cancel()
        if self.account_id is not None:
            left = app.sockets_by_account.get(self.account_id, 1) - 1
            if left > 0:
                app.sockets_by_account[self.account_id] = left
            else:
                app.sockets_by_account.pop(self.account_id, None)
            self.account_id = None
        await self.outbound.close()
        memtrim.soon()   # what this socket's buffers held goes back to the system

    def _on_slow_consumer(self) -> None:
        self.app.metrics.slow_consumers.inc()
        self._on_cut_off()

    def _on_cut_off(self) -> None:
        self.streams.drop_all()

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # -- requests ----------------------------------------------------------------------------
    async def _on_frame(self, message) -> None:
        framing = self.framing
        read = framing.read(message)
        if type(read) is Request:
            envelope = read.envelope
            if not framing.concurrent or (self.inline_reads and type(envelope) is bytes
                                          and peek_action_name(envelope) in INLINE_ACTIONS) \
                    or (type(envelope) is bytes and len(envelope) > self.app.config.limits.max_frame):
                # v1 answers in the order received; in v2 a read that never waits (routes.py: inline)
                # is answered right here, without the cost of a task per request. (On a shared
                # store every read waits for the database, so none is inline there.) An upload
                # chunk too: the socket is not read further until it is stored (one at a time).
                await self._answer(read)
                return
            await self.inflight.acquire()  # back-pressure: at most N requests of this socket at once
            self.spawn(self._run(read))
        elif type(read) is Unsubscribe:
            self._unsubscribe(read)
        else:
            self._unverified()
            self.send(framing.refusal(read))

    async def _run(self, request: Request) -> None:
        try:
            await self._answer(request)
        finally:
            self.inflight.release()

    async def _answer(self, request: Request) -> None:
        outcome = await execute(self.app, self, request.envelope)
        if outcome.junk:
            self._unverified()
        if not self.streams.answer(outcome, request):
            name = outcome.envelope.name if outcome.envelope is not None else None
            self.send(self.framing.reply(request, outcome.response, name))

    def _unverified(self) -> None:
        """One more frame that was not a verified action: past the junk bound the socket is
        closed 1008, right after the answer to this frame."""
        if not self.junk.take() and self.close_after_answer is None:
            self.close_after_answer = (1008, JUNK_CLOSE_REASON)

    def _unsubscribe(self, request: Unsubscribe) -> None:
        key = request.key
        if not isinstance(key, str):
            self.send(self.framing.refusal(Refusal(request.id, error(400, "Unsubscribe needs a text key"))))
            return
        self.streams.unsubscribe(key)
        self.send(self.framing.unsubscribed(request))

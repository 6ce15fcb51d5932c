"""One WebSocket connection: framing (v1 or v2), account binding, subscriptions, requests."""
from __future__ import annotations

import asyncio
import itertools
import json
import logging

from protocol import dagcbor
from protocol.errors import ProtocolError
from protocol.v2 import decode_v2_request, peek_action_name, peek_id, split_request
from server import jsonwire
from server.dispatch import Outcome, error, execute
from server.frames import Outgoing
from server.outbound import Outbound
from server.ratelimit import TokenBucket
from server.subscriptions import SessionSubscription, Subscription
from server.v2frames import response_frame
from server.wire_values import encode_value

log = logging.getLogger("seed_agents.connection")

V2 = "seed-agents.v2"
_MAX_TEXT_BYTES = 4 << 20   # the socket's max_size: a longer array is not read
# Read actions whose handlers never await: run inline in the socket's reader (see _on_v2).
INLINE_ACTIONS = frozenset({"GetAgent", "ListAgents", "GetSession", "ListSessions", "ListModelProviders"})
# One numbering for WebSocket and HTTP connections: the replay rule tells them apart by id.
new_connection_id = itertools.count(1).__next__


class Connection:
    def __init__(self, app, ws) -> None:
        self.id = new_connection_id()
        self.app = app
        self.ws = ws
        self.v2 = ws.subprotocol == V2
        self.account_id: str | None = None
        self.subs: dict[str, Subscription] = {}
        limits = app.config.limits
        self.outbound = Outbound(ws, max_bytes=limits.outbound_queue_bytes,
                                 slow_close_timeout=app.config.slow_close_timeout,
                                 on_cut_off=self._on_slow_consumer)
        self.inflight = asyncio.Semaphore(limits.inflight_per_socket)
        self.unbound_bucket = TokenBucket(limits.rate_per_second, limits.rate_burst)
        self.tasks: set[asyncio.Task] = set()
        self.close_after_answer: tuple[int, str] | None = None   # a limit's close, after its Error

    # -- output ----------------------------------------------------------------------------
    def send_event(self, event: Outgoing, *, bounded: bool = True) -> None:
        """Live events are bounded (past the bound the socket is cut off); a replay's own
        frames are not, since the replay paces itself with `wait_room`."""
        if self.v2:
            self.outbound.put(event.cbor(), event.key, event.seq, bounded=bounded, frame=event.ws_cbor)
        else:
            self.outbound.put(event.json(), event.key, event.seq, bounded=bounded, frame=event.ws_json)

    def send_value(self, value: dict) -> None:
        """A response or notice: unbounded here, the reader loop applies back-pressure."""
        self.outbound.put(encode_value(value) if self.v2 else jsonwire.dumps(value), bounded=False)
        self._close_if_asked()

    def send_response(self, req_id: int, response: dict) -> None:
        self.outbound.put(response_frame(req_id, response), bounded=False)
        self._close_if_asked()

    def _close_if_asked(self) -> None:
        if self.close_after_answer is not None:
            self.outbound.close_after_queued(*self.close_after_answer)

    # -- account binding -------------------------------------------------------------------
    def bind_account(self, account_id: str) -> None:
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
        self.app.sockets_by_account[account_id] = count + 1
        self.account_id = account_id

    # -- lifecycle -------------------------------------------------------------------------
    async def serve(self) -> None:
        app = self.app
        app.connections.add(self)
        app.metrics.connections.labels("v2" if self.v2 else "v1").inc()
        self.outbound.start()
        try:
            if not self.v2:
                self.send_value({"_": "connected", "connectedAt": app.now_ms()})
            async for message in self.ws:
                await self.outbound.wait_room()  # a client that does not read stops being read
                if self.outbound.closed:
                    break
                if self.v2:
                    await self._on_v2(message)
                else:
                    await self._on_v1(message)
        except Exception as exc:  # noqa: BLE001 - a closed socket ends here too
            if not isinstance(exc, (asyncio.CancelledError,)) and "ConnectionClosed" not in type(exc).__name__:
                log.exception("connection %s failed", self.id)
        finally:
            await self._cleanup()

    async def drain_inflight(self) -> None:
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def _cleanup(self) -> None:
        app = self.app
        app.connections.discard(self)
        app.metrics.connections.labels("v2" if self.v2 else "v1").dec()
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

    def _on_slow_consumer(self) -> None:
        self.app.metrics.slow_consumers.inc()
        self._on_cut_off()

    def _on_cut_off(self) -> None:
        for key, sub in list(self.subs.items()):
            self._drop_subscription(key, sub)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # -- v1 ----------------------------------------------------------------------------------
    async def _on_v1(self, message) -> None:
        limits = self.app.config.limits
        if isinstance(message, str):
            message = _byte_array(message)   # the Seed server's other form of a binary frame
            if message is None:
                self.send_value(error(400, "text frames are not actions: send a binary DAG-CBOR "
                                           "SignedActionEnvelope (or a JSON array of its byte values)"))
                return
        if len(message) > limits.max_frame:
            self.send_value(error(413, f"frame of {len(message)} bytes is over the limit of {limits.max_frame}"))
            return
        outcome = await execute(self.app, self, message)
        name = outcome.envelope.name if outcome.envelope else _peek_action_name(message)
        response = outcome.response
        if name == "Subscribe":
            if response.get("_") == "Error":
                self.send_value({"_": "error", "message": response["message"], "status": response["status"]})
            else:
                self._start_subscription(outcome, None)
            return
        self.send_value(response)

    # -- v2 ----------------------------------------------------------------------------------
    async def _on_v2(self, message) -> None:
        limits = self.app.config.limits
        if isinstance(message, str):
            self.send_value({"_": "error", "status": 400, "message": "v2 frames are binary DAG-CBOR maps"})
            return
        split = split_request(message)
        if split is not None:
            req_id, envelope = split
            if len(envelope) > limits.max_frame:
                self.send_response(req_id, error(413, f"envelope of {len(envelope)} bytes is over the limit of {limits.max_frame}"))
                return
        elif len(message) > limits.max_frame:
            # Not decoded at all: a large non-canonical frame would cost the strict reader
            # seconds of CPU. The id is answered when it can be read from the frame's head.
            req_id = peek_id(message)
            err = error(413, f"frame of {len(message)} bytes is over the limit of {limits.max_frame}")
            if req_id is None:
                self.send_value({"_": "error", "status": 413, "message": err["message"]})
            else:
                self.send_response(req_id, err)
            return
        else:
            try:
                # One more level than an envelope may have: the {id, ...} map around it.
                request = decode_v2_request(message, max_size=limits.max_frame, max_depth=limits.max_depth + 1)
            except ProtocolError as exc:   # no usable id: nobody to answer but the socket
                self.send_value({"_": "error", "status": exc.status, "message": exc.message})
                return
            req_id = request.id
            if request.kind == "Unsubscribe":
                self._unsubscribe(req_id, request.message.get("key"))
                return
            if "envelope" not in request.message:
                self.send_response(req_id, error(400, "a v2 request is {id, envelope} or {id, _: 'Unsubscribe', key}"))
                return
            envelope = request.message["envelope"]
        if type(envelope) is bytes and peek_action_name(envelope) in INLINE_ACTIONS:
            # A read that never waits (Get*/List*): answered right here, without the cost of a
            # task per request. Anything else runs as its own task, concurrently.
            await self._answer_v2(req_id, envelope)
            return
        await self.inflight.acquire()  # back-pressure: at most N requests of this socket at once
        self._spawn(self._run_v2(req_id, envelope))

    async def _run_v2(self, req_id: int, envelope) -> None:
        try:
            await self._answer_v2(req_id, envelope)
        finally:
            self.inflight.release()

    async def _answer_v2(self, req_id: int, envelope) -> None:
        outcome = await execute(self.app, self, envelope)
        if outcome.envelope is not None and outcome.envelope.name == "Subscribe" \
                and outcome.response.get("_") != "Error":
            self._start_subscription(outcome, req_id)
        else:
            self.send_response(req_id, outcome.response)

    def _unsubscribe(self, req_id: int, key) -> None:
        if not isinstance(key, str):
            self.send_response(req_id, error(400, "Unsubscribe needs a text key"))
            return
        sub = self.subs.get(key)
        if sub is not None:
            self._drop_subscription(key, sub)
        self.send_response(req_id, {"_": "UnsubscribeResponse", "key": key})

    # -- subscriptions ---------------------------------------------------------------------
    def _start_subscription(self, outcome: Outcome, req_id: int | None) -> None:
        action = outcome.action
        key = action.key
        limit = self.app.config.limits.subs_per_socket
        if key not in self.subs and len(self.subs) >= limit:
            err = error(429, f"too many subscriptions on this connection (limit {limit})")
            if req_id is None:
                self.send_value({"_": "error", "message": err["message"], "status": 429})
            else:
                self.send_response(req_id, err)
            return
        old = self.subs.get(key)
        if old is not None:
            self._drop_subscription(key, old)
        kind, _, ident = key.partition("/")
        if kind == "sessions":
            sub: Subscription = SessionSubscription(self, key, ident, action.after_seq or 0)
        else:
            sub = Subscription(self, key)
        if req_id is None:
            self.send_value({"_": "subscribed", "key": key, "accountId": outcome.envelope.account_id})
        else:
            self.send_response(req_id, outcome.response)
        self.subs[key] = sub
        self.app.hub.add(key, sub)  # before the replay reads, so nothing published is missed
        self.app.metrics.subscriptions.inc()
        sub.task = self._spawn(self._run_subscription(sub))

    async def _run_subscription(self, sub: Subscription) -> None:
        try:
            await sub.start()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("subscription %s failed", sub.key)
            self.send_value({"_": "error", "message": f"subscription {sub.key} failed", "status": 500})
            self._drop_subscription(sub.key, sub)

    def _drop_subscription(self, key: str, sub: Subscription) -> None:
        if self.subs.get(key) is sub:
            del self.subs[key]
            self.app.metrics.subscriptions.dec()
        self.app.hub.remove(key, sub)
        if sub.task is not None and sub.task is not asyncio.current_task():
            sub.task.cancel()


def _peek_action_name(frame: bytes) -> str | None:
    """The action name of a frame that failed verification, to pick v1's error shape."""
    try:
        value = dagcbor.decode(frame)
        return value["action"]["_"]
    except Exception:  # noqa: BLE001 - best effort only
        return None


def _byte_array(text: str) -> bytes | None:
    """A text frame holding a JSON array of byte values (integers 0..255), as those bytes; else None."""
    text = text.strip()
    if not text.startswith("[") or len(text) > 5 * _MAX_TEXT_BYTES:
        return None
    try:
        values = json.loads(text)
        return bytes(values) if type(values) is list and all(type(v) is int for v in values) else None
    except (ValueError, TypeError):   # bytes() refuses values outside 0..255
        return None

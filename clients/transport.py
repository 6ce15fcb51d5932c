"""The socket under an AgentsClient: one v2 WebSocket, requests matched by id, subscriptions
routed by key, and reconnection.

Why one reader task: frames arrive in order on one socket, and the order matters (a Subscribe
response comes before that key's first event), so a single loop reads, resolves response
futures and feeds subscriptions; everything else (callers, resubscriptions) awaits futures.

Reconnect: when the socket drops (server restart, 1001 going away, 1013 slow consumer, a
missed ping) requests in flight fail at once with AgentsError(0, reason="lost"); the loop dials
again with backoff (0.1 s doubling to 2 s, forever until `close()`), then subscribes every open
subscription again, sessions with `afterSeq` = what the caller already has. Requests made while
it is down wait up to `connect_timeout` for the socket to come back.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
from collections.abc import Callable

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException

from . import actions
from .errors import AgentsError
from .subscription import DEFAULT_BUFFER, Subscription, route
from .wire import SUBPROTOCOL, is_response, read_frame, request_frame, unsubscribe_frame

log = logging.getLogger("seed_agents.client")

BACKOFF_INITIAL = 0.1
BACKOFF_MAX = 2.0


_PLAIN_ANSWER_TO_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST",
                                  "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL"})


def _describe(exc: BaseException) -> tuple[str, str]:
    """(detail, cause): the cause tells a person's mistakes apart (see commands.common.explain)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused", "refused"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timed out", "timeout"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}", "unknown-host"
    if isinstance(exc, ssl.SSLError):
        # A TLS client hello answered in plain text: an http:// server behind an https:// URL.
        if getattr(exc, "reason", None) in _PLAIN_ANSWER_TO_TLS:
            return "the server answered the TLS handshake in plain HTTP", "tls-plain"
        return f"TLS failed: {exc.reason or exc}", "tls"
    if isinstance(exc, InvalidStatus):
        code = exc.response.status_code
        return f"HTTP {code} instead of a WebSocket", f"http-{code}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror, "os"
    return str(exc) or type(exc).__name__, "other"


def _close_detail(ws) -> str:
    code = ws.close_code
    if code is None:
        return "connection dropped"
    return f"closed with code {code}" + (f": {ws.close_reason}" if ws.close_reason else "")


class Transport:
    def __init__(self, url: str, sign: Callable[[dict], dict], *, reconnect: bool = True,
                 connect_timeout: float = 10.0, request_timeout: float | None = None,
                 buffer_size: int = DEFAULT_BUFFER, ping_interval: float | None = 20.0,
                 on_state: Callable[[str, str], None] | None = None) -> None:
        self.url = url
        self._sign = sign
        self.reconnect = reconnect
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.buffer_size = buffer_size
        self.ping_interval = ping_interval
        self._on_state = on_state
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._subs: dict[str, Subscription] = {}
        self._ws = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._side_tasks: set[asyncio.Task] = set()
        self._closing = False
        self._closed = False
        self._final_error: AgentsError | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        self._ws = await self._dial()
        self._connected.set()
        self._task = asyncio.create_task(self._run(), name=f"seed-agents client {self.url}")

    @property
    def connected(self) -> bool:
        return self._connected.is_set() and not self._closed

    async def close(self) -> None:
        if self._closed:
            return
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._shutdown(None)
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await ws.close()
            except Exception:  # noqa: BLE001 - closing a dead socket is fine
                pass

    async def _dial(self):
        try:
            ws = await connect(self.url, subprotocols=[SUBPROTOCOL], proxy=None,
                               open_timeout=self.connect_timeout, max_size=None, compression=None,
                               ping_interval=self.ping_interval, ping_timeout=self.ping_interval,
                               close_timeout=2)
        except InvalidURI:
            raise AgentsError(0, f"{self.url!r} is not a WebSocket URL (expected "
                                 "ws://HOST:PORT/agents/ws)", reason="unreachable", url=self.url,
                              cause="scheme") from None
        except (OSError, asyncio.TimeoutError, WebSocketException) as exc:
            detail, cause = _describe(exc)
            raise AgentsError.unreachable(self.url, detail, cause=cause) from None
        if ws.subprotocol != SUBPROTOCOL:
            await ws.close()
            raise AgentsError.unreachable(self.url, f"the server did not accept the {SUBPROTOCOL} "
                                                    "subprotocol", cause="subprotocol")
        return ws

    async def _run(self) -> None:
        error: AgentsError | None = None
        try:
            while True:
                ws = self._ws
                await self._read(ws)
                detail = _close_detail(ws)
                self._dropped()
                if self._closing:
                    break
                if not self.reconnect:
                    error = AgentsError(0, f"the connection to {self.url} was lost ({detail})",
                                        reason="lost", url=self.url)
                    break
                log.info("connection to %s lost (%s); reconnecting", self.url, detail)
                self._state("disconnected", detail)
                self._ws = await self._redial()
                self._connected.set()
                log.info("reconnected to %s", self.url)
                self._state("connected", self.url)
                for sub in list(self._subs.values()):
                    if sub.confirmed:  # a first Subscribe in flight fails to its caller instead
                        self._spawn(self._resubscribe(sub))
        finally:
            self._shutdown(error)

    async def _redial(self):
        delay = BACKOFF_INITIAL
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._dial()
            except AgentsError as exc:
                log.debug("reconnect failed: %s", exc)
                delay = min(delay * 2, BACKOFF_MAX)

    def _dropped(self) -> None:
        self._connected.clear()
        for sub in self._subs.values():
            sub.active = False
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(AgentsError.lost(self.url))

    def _shutdown(self, error: AgentsError | None) -> None:
        if self._closed:
            return
        self._closed = True
        self._final_error = error
        self._connected.set()  # wake requests waiting for a socket: they see _closed
        for task in list(self._side_tasks):
            task.cancel()
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error or AgentsError.closed(self.url))
        subs, self._subs = list(self._subs.values()), {}
        for sub in subs:
            sub._end(error)

    def _state(self, state: str, detail: str) -> None:
        if self._on_state is not None:
            try:
                self._on_state(state, detail)
            except Exception:  # noqa: BLE001 - a caller's callback must not kill the socket loop
                log.exception("on_state callback failed")

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    # -- reading ---------------------------------------------------------------------------
    async def _read(self, ws) -> None:
        try:
            async for data in ws:
                if not isinstance(data, bytes):
                    log.warning("ignoring a text frame on a v2 socket: %.200s", data)
                    continue
                try:
                    frame, bodies = read_frame(data)   # bodies: an append's event bytes (history checks)
                except Exception as exc:  # noqa: BLE001 - one bad frame must not end the stream
                    log.warning("ignoring an undecodable frame from %s: %s", self.url, exc)
                    continue
                if is_response(frame):
                    fut = self._pending.pop(frame["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(frame["response"])
                    continue
                sub = route(self._subs, frame)
                if sub is not None:
                    await sub._feed(frame, bodies)
                elif frame.get("_") == "error":
                    log.warning("server error notice: %s %s", frame.get("status"), frame.get("message"))
        except ConnectionClosed:
            pass

    # -- requests --------------------------------------------------------------------------
    async def _ready(self):
        if not self._connected.is_set() and not self._closed:
            try:
                await asyncio.wait_for(self._connected.wait(), self.connect_timeout)
            except asyncio.TimeoutError:
                raise AgentsError.unreachable(self.url, "still reconnecting") from None
        if self._closed:
            raise self._final_error or AgentsError.closed(self.url)
        return self._ws

    async def _roundtrip(self, build: Callable[[int], bytes], timeout: float | None) -> dict:
        ws = await self._ready()
        req_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        try:
            try:
                await ws.send(build(req_id))
            except ConnectionClosed:
                raise AgentsError.lost(self.url) from None
            try:
                return await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise AgentsError(0, f"no answer from {self.url} within {timeout} s",
                                  reason="lost", url=self.url) from None
        finally:
            self._pending.pop(req_id, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # mark it retrieved: we raised our own error already
            else:
                fut.cancel()

    async def request(self, action: dict) -> dict:
        """Sign `action` afresh (new ts), send it, and return its response value; an Error
        value is raised as AgentsError(status, message)."""
        response = await self._roundtrip(lambda req_id: request_frame(req_id, self._sign(action)),
                                         self.request_timeout)
        if not isinstance(response, dict) or response.get("_") == "Error":
            raise AgentsError.from_response(response if isinstance(response, dict) else {})
        return response

    # -- subscriptions ---------------------------------------------------------------------
    async def subscribe(self, key: str, after_seq: int | None = None, follower=None) -> Subscription:  # noqa: ANN001
        if key in self._subs:
            raise AgentsError(409, f"this client is already subscribed to {key}; close that "
                                   "subscription first")
        sub = Subscription(self, key, after_seq, self.buffer_size)
        sub.follower = follower   # (clients/history.py: checks the replay when a key is pinned)
        # Registered before the request, so the events right behind the response find it.
        self._subs[key] = sub
        try:
            await self.request(actions.subscribe(key, after_seq))
        except BaseException:
            if self._subs.get(key) is sub:
                del self._subs[key]
            sub._end(discard=True)
            raise
        sub.active = sub.confirmed = True
        return sub

    async def _resubscribe(self, sub: Subscription) -> None:
        after = sub.delivered_seq if sub.is_session else None
        try:
            await self.request(actions.subscribe(sub.key, after))
        except AgentsError as exc:
            if exc.status == 0:
                return  # dropped again: the next reconnect tries again
            log.warning("resubscribing to %s failed: %s", sub.key, exc)
            if self._subs.get(sub.key) is sub:
                del self._subs[sub.key]
            sub._end(exc)
            return
        if self._subs.get(sub.key) is sub:
            sub.active = True
        else:  # closed by the caller meanwhile
            await self._send_unsubscribe(sub.key)

    async def _unsubscribe(self, sub: Subscription) -> None:
        sub._end(discard=True)
        if self._subs.get(sub.key) is not sub:
            return
        del self._subs[sub.key]
        if self.connected:
            await self._send_unsubscribe(sub.key)

    async def _send_unsubscribe(self, key: str) -> None:
        try:
            await self._roundtrip(lambda req_id: unsubscribe_frame(req_id, key),
                                  self.request_timeout or 10.0)
        except AgentsError:
            pass  # the socket went away: the server has forgotten the subscription anyway

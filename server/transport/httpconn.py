"""HTTP/1.1 on the server's one port, as an asyncio protocol that keeps only the time and the
writes: protocol/wire/http_reader.py reads the requests from the bytes (events, with the head, chunk
and pipeline bounds), protocol/wire/framing_http.py decides every answer's bytes, and the route
table (server/http_routes.py) answers whatever is not an action.

One `HttpConnection` per TCP connection. Requests are answered in order (keep-alive, pipelining
allowed); an action's body is read into memory only up to the frame limit: a declared
Content-Length over it is refused before any of the body is read, and a chunked body is cut
where it crosses the limit (an endpoint of the route table has its own cap, the same way). A
request whose head or body stalls is dropped after its bound (`Config.http_header_timeout`,
`http_body_timeout`); an idle keep-alive connection after `http_idle_timeout`. A WebSocket
upgrade on `/agents/ws` hands the socket to a websockets server connection (see
server/transport/listener.py), fed the request it already sent.

Against hostile clients (docs/operations.md "Security"): the reader's bounds (a head over
32 KiB is 431 at once, and so are chunk framing and trailers past the same bound; at most
16 requests wait unanswered, the rest of the read waits unparsed and the socket is
not read); the answers yield to other clients between each other; answers make progress within
`--write-timeout` or the connection is dropped (server/transport/watchdog.py; its buffers go
back to the system); requests that are not actions cost the connection's and the address's
probe buckets.
"""
from __future__ import annotations

import asyncio
import collections
import fcntl
import logging
import socket
import struct
import termios

from seed_agents.protocol.wire.events import error_response
from seed_agents.protocol.wire.framing_http import WS_PATH, HttpFraming, Route, with_origin
from seed_agents.protocol.wire.framing_types import Refusal, Request
from seed_agents.protocol.wire.http_reader import Body, End, Head, HttpReader, Refused, Started

from ..http_routes import Endpoint, HttpRequest, HttpRoutes
from ..ratelimit import TokenBucket
from ..verification.dispatch import execute
from . import memtrim
from .connection import new_connection_id
from .origins import DUPLICATE, REFUSED, policy
from .peers import address_of
from .watchdog import WriteWatchdog

log = logging.getLogger("seed_agents.http")

__all__ = ["HttpConnection", "HttpPeer", "reset", "unsent_bytes"]

LINGER_SECONDS = 2.0         # after a refusal with an unread body: read and drop, then close
_PIPELINE_PAUSE = 4          # requests waiting on one connection before it stops being read
_WRITE_HIGH = 256 * 1024     # a response writer waits while the socket holds more than this
_TURN_BYTES = 256 * 1024     # of one answer written in one turn of the loop
# Per connection, requests that are not actions (the address has its own bucket, --probe-rate).
CONN_PROBE_RATE, CONN_PROBE_BURST = 50.0, 100
# What a probe costs of its address's bucket, by route kind: rendering /metrics takes about
# fifty times the CPU of a health answer (2-4 ms on the event loop, every counter and bucket
# of the registry), so a flood of it from one address gets a quarter of the renders a flood
# of health probes gets answers (a scraper's one request every few seconds never notices).
PROBE_COST = {"metrics": 4.0}
JUNK_REFUSED = ("too many actions from this address failed verification; slow down (a tenth of "
                "--max-unverified refills per second)")


class HttpPeer:
    """What the verification pipeline needs of a connection, for HTTP: one per TCP connection
    (for the replay rule a keep-alive connection is one connection), bound to no account (an
    HTTP request stands alone)."""

    __slots__ = ("id", "account_id", "own_bucket", "signers")
    transport = "http"   # for the access log

    def __init__(self, bucket: TokenBucket) -> None:
        self.id = new_connection_id()
        self.account_id = None
        self.own_bucket = bucket   # every request costs it, verified or not
        self.signers: set[str] = set()   # (kept for the pipeline's sake; nothing is bound)

    def check_bind(self, account_id: str) -> None:
        """An HTTP request binds nothing."""

    def bind_account(self, account_id: str) -> None:
        """An HTTP request binds nothing."""

    def unbind_account(self) -> None:
        """(Nothing was bound.)"""


class _Reading:
    """The request being read: its head, route and what of its body is kept."""

    __slots__ = ("head", "route", "endpoint", "body", "body_size", "refusal", "origin")

    def __init__(self, head: Head, route: Route, endpoint: Endpoint | None, origin: str | None) -> None:
        self.head = head
        self.route = route
        self.endpoint = endpoint
        self.body: list[bytes] = []
        self.body_size = 0
        self.refusal: Refusal | None = None   # decided on the head; the body is then dropped
        self.origin = origin                  # the Origin header, when the request has one

    @property
    def keeps_body(self) -> bool:
        kind = self.route.kind
        return (kind == "message" and self.refusal is None) or (self.endpoint is not None and kind == self.endpoint.kind)


class _Queued:
    """A request read and not yet answered (or a marker: a final answer, the upgrade)."""

    __slots__ = ("route", "method", "headers", "refusal", "body", "keep_alive", "origin", "endpoint", "raw")

    def __init__(self, route: Route, method: str = "", headers=(), refusal: Refusal | None = None,
                 body: bytes | None = None, keep_alive: bool = False, origin: str | None = None,
                 endpoint: Endpoint | None = None, raw: bytes = b"") -> None:
        self.route, self.method, self.headers, self.refusal, self.body = route, method, headers, refusal, body
        self.keep_alive, self.origin, self.endpoint, self.raw = keep_alive, origin, endpoint, raw


class HttpConnection(asyncio.Protocol):
    def __init__(self, app, framing: HttpFraming, routes: HttpRoutes, server, upgrade) -> None:
        self.app = app
        self.framing = framing
        self.routes = routes
        self.server = server              # http_connections, handler_tasks (waited for at stop)
        self.registry: set = server.http_connections
        self.upgrade = upgrade            # (transport, bytes of the request and after) -> None
        cfg = app.config
        self.header_timeout = cfg.http_header_timeout
        self.body_timeout = cfg.http_body_timeout
        self.idle_timeout = cfg.http_idle_timeout
        self.max_frame = cfg.limits.max_frame
        self.origins = policy(cfg.allowed_origins, cfg.host)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.reader = HttpReader()
        self.reading: _Reading | None = None
        self.peer = HttpPeer(TokenBucket(cfg.limits.rate_per_second, cfg.limits.rate_burst, app.rate_clock))
        self.probes = TokenBucket(CONN_PROBE_RATE, CONN_PROBE_BURST, app.rate_clock)
        self.addresses = server.addresses
        self.address: str | None = None   # counted in `addresses` until this connection ends
        self.watchdog: WriteWatchdog | None = None
        self.queue: collections.deque[_Queued] = collections.deque()   # read, not yet answered
        self.worker: asyncio.Task | None = None
        self.closed = False
        self.discarding = False      # a final answer is decided: read and drop the rest
        self.upgraded = False
        self.shutting_down = False
        self.eof = False
        self.upgrade_tail = b""
        self._paused_reading = False
        self._deadline: asyncio.TimerHandle | None = None   # armed at or before _deadline_at
        self._deadline_at: float | None = None   # loop time the current bound ends, if any
        self._deadline_idle = False
        self._paused = False
        self._drain: asyncio.Future | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.watchdog = WriteWatchdog(transport, self.app.config.write_timeout, self._stalled, watch_closing=True)
        self.registry.add(self)
        limit = self.app.config.limits.max_connections
        if len(self.registry) > limit:
            self._finish(self.framing.json(503, {"status": "error", "message": "the server is at its "
                                                 "connection limit; retry later"}, keep_alive=False))
            return
        address = address_of(transport)
        if not self.addresses.admit(address):
            # Connections are free to open: one address must not take every slot.
            self._finish(self.framing.json(503, {"status": "error", "message": "too many connections from "
                                                 "this address; retry later"}, keep_alive=False))
            return
        self.address = address
        self._set_deadline(self.idle_timeout, idle=True)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.registry.discard(self)
        self._drop_timer()
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.address is not None:
            self.addresses.release(self.address)
            self.address = None
        self.queue.clear()            # nothing that was not started runs for a gone client
        self.reader.close()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        memtrim.soon()   # what its buffers held (an answer it never read) goes back to the system

    def data_received(self, data: bytes) -> None:
        if self.upgraded:
            self.upgrade_tail += data
            return
        if self.discarding or self.closed:
            return   # a final answer is decided: what still arrives is dropped, never kept
        self._read(data)

    def eof_received(self) -> bool:
        # The client will send nothing more; answers to what it sent still go out.
        self.eof = True
        if not self.queue and self.worker is None:
            return False
        return True

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    # -- the reader's events ---------------------------------------------------------------
    def _read(self, data: bytes) -> None:
        """Handle what the reader makes of `data` (b"": what waited behind the pipeline bound)."""
        reader = self.reader
        for event in reader.feed(data):
            if isinstance(event, Body):
                self._on_body(event.data)
            elif isinstance(event, Started):
                self._set_deadline(self.header_timeout)
            elif isinstance(event, Head):
                self._on_head(event)
            elif isinstance(event, End):
                self._on_end(event)
                if self.upgraded:   # to the WebSocket: the rest is the socket's
                    self.upgrade_tail = reader.detach()
                    return
            elif isinstance(event, Refused):
                self._final(self.framing.json(event.status, {"status": "error", "message": event.message},
                                              keep_alive=False))
            if self.discarding or self.closed:
                reader.close()
                return
        if reader.paused:
            self._pause_reading()

    def _on_head(self, head: Head) -> None:
        origin = None
        origins = 0
        for name, value in head.headers:
            if name.lower() == b"origin":
                origin = value.decode("latin-1")
                origins += 1
        if origins > 1:
            # Which one would a check read? Refused outright (a browser sends one).
            self._final(self.framing.json(400, {"status": "error", "message": DUPLICATE}, keep_alive=False),
                        origin)
            return
        route, endpoint = self.routes.route(self.framing, head.method, head.target, head.headers)
        self.reading = reading = _Reading(head, route, endpoint, origin)
        if endpoint is not None and route.kind == endpoint.kind:
            # An endpoint's own body cap (e.g. webhooks, --webhook-max-body), checked here.
            declared = next((int(v) for n, v in head.headers if n.lower() == b"content-length"), 0)
            if self._over_endpoint_cap(declared):
                return
        if route.kind != "message":
            self._set_deadline(self.body_timeout)
            return
        content_type = content_length = None
        expect = b""
        for name, value in head.headers:
            lname = name.lower()
            if lname == b"content-type":
                content_type = value.decode("latin-1")
            elif lname == b"content-length":
                content_length = int(value)   # llhttp has checked it is a number
            elif lname == b"expect":
                expect = value.lower()
        refusal = self.framing.check_head(content_type, content_length)
        if refusal is None and not self.origins.allows(origin):
            refusal = Refusal(None, error_response(403, REFUSED))
        if refusal is not None and refusal.value["status"] == 413:
            # Answered now; the body is never read (the connection closes after the answer).
            self._final(self.framing.refusal(refusal, keep_alive=False, route=route))
            return
        if refusal is not None and expect == b"100-continue":
            # The client waits for 100 Continue before it sends the body: its refusal instead,
            # at once, and the connection closes (the body is never read).
            self._final(self.framing.refusal(refusal, keep_alive=False, route=route))
            return
        if refusal is None and not self.addresses.junk_ready(self.address or ""):
            # This address's actions keep failing verification: no more of its bodies are read
            # (each costs at least a hash of up to a megabyte) until its bucket refills.
            self._final(self.framing.refusal(Refusal(None, error_response(429, JUNK_REFUSED)), keep_alive=False,
                                             route=route))
            return
        reading.refusal = refusal
        if refusal is None and expect == b"100-continue" and not self.queue and self.worker is None:
            self._write(self.framing.continue_())
        self._set_deadline(self.body_timeout)

    def _on_body(self, data: bytes) -> None:
        reading = self.reading
        if reading is None or not reading.keeps_body:
            return   # a body nobody reads is dropped as it comes
        reading.body_size += len(data)
        if reading.endpoint is not None:
            if not self._over_endpoint_cap(reading.body_size):
                reading.body.append(data)
            return
        if reading.body_size > self.max_frame and reading.body_size > self.framing.body_limit(reading.body or [data]):
            reading.body = []
            self._final(self.framing.refusal(self.framing.body_too_large(reading.body_size), keep_alive=False))
            return
        reading.body.append(data)

    def _over_endpoint_cap(self, size: int) -> bool:
        reading = self.reading
        endpoint = reading.endpoint
        if size <= endpoint.body_cap:
            return False
        reading.body = []
        self._final(self.framing.json(413, {"status": "error", "message": f"{endpoint.what} body of {size} bytes "
                                            f"is over the limit of {endpoint.body_cap}"}, keep_alive=False))
        return True

    def _on_end(self, end: End) -> None:
        self._cancel_deadline()
        reading, self.reading = self.reading, None
        route, head = reading.route, reading.head
        keep_alive = end.keep_alive and not self.shutting_down
        upgrade = route.kind == "ws" and end.upgrade
        not_probe = route.kind == "message" or (reading.endpoint is not None and reading.endpoint.limited_alone
                                                and route.kind == reading.endpoint.kind)
        if not not_probe and not upgrade and not self._probe_allowed(PROBE_COST.get(route.kind, 1.0)):
            self._final(self.framing.too_many_probes(), reading.origin)
            return
        if upgrade:
            self.queue.append(_Queued(_UPGRADE, raw=head.raw()))
            self.upgraded = True
            self.transport.pause_reading()   # what follows is the WebSocket's, read after the handover
            self._start_worker()
            return
        body = b"".join(reading.body) if reading.keeps_body or route.kind == "message" else None
        self.queue.append(_Queued(route, head.method, head.headers, reading.refusal, body, keep_alive,
                                  reading.origin, reading.endpoint))
        if not keep_alive:
            self.discarding = True   # nothing after a `Connection: close` request is read
        if len(self.queue) >= _PIPELINE_PAUSE:
            self._pause_reading()
        self._start_worker()

    def _probe_allowed(self, cost: float) -> bool:
        """A request that is not an action (health, version, metrics, preflight, 404...) costs
        a token of this connection and `cost` of its address."""
        return self.probes.take() and self.addresses.probe(self.address or "", cost)

    def _pause_reading(self) -> None:
        if not self._paused_reading and not self.closed:
            self._paused_reading = True
            self.transport.pause_reading()

    # -- answering -------------------------------------------------------------------------
    def _start_worker(self) -> None:
        if self.worker is None:
            self.worker = self.loop.create_task(self._answer_queued())
            self.server.handler_tasks.add(self.worker)

    async def _answer_queued(self) -> None:
        try:
            while self.queue and not self.closed:
                item = self.queue.popleft()
                if item.route is _UPGRADE:
                    self._hand_over(item.raw)
                    return
                if item.route is _FINAL:
                    self._write(item.body)
                    self._close_after_write()
                    return
                self.reader.answered()
                answer = await self._answer(item)
                if self.closed:
                    return
                if isinstance(answer, list):
                    await self._write_pieces(answer, item.origin)
                    if self.closed:
                        return
                else:
                    self._write(self._cors(answer, item.origin))
                if not item.keep_alive:
                    self._close_after_write()
                    return
                if self.transport.get_write_buffer_size() > _WRITE_HIGH:
                    await self._wait_drain()   # bounded: the write watchdog drops a peer that stalls
                if self.queue or self.reader.buffered:
                    # Pipelined answers take turns with every other client's work (with nothing
                    # more to answer, the task ends here instead: no pass of the loop for that).
                    await asyncio.sleep(0)
                if self.reader.buffered and not self.reader.paused and not self.closed:
                    self._read(b"")   # what waited unparsed behind the pipeline bound
            if self._paused_reading and not self.closed and not self.reader.buffered:
                self._paused_reading = False
                self.transport.resume_reading()
            if not self.closed and not self.reader.in_request:
                if self.shutting_down or self.eof:
                    self.transport.close()
                else:
                    self._set_deadline(self.idle_timeout, idle=True)
        except Exception:  # noqa: BLE001 - a bug must not leave the client hanging
            log.exception("HTTP connection failed")
            if not self.closed:
                self.transport.abort()
        finally:
            self.worker = None
            self.server.handler_tasks.discard(asyncio.current_task())

    async def _write_pieces(self, pieces: list[bytes], origin: str | None) -> None:
        """An action's answer, piece by piece (its head, then the body as encoded: a session's
        events are never joined into one copy): after each `_TURN_BYTES` the loop is given to
        the other clients, and a client that stops reading gets no more pieces until it reads
        (or the write watchdog drops it), so its answer is not copied into the transport."""
        pieces[0] = self._cors(pieces[0], origin)
        turn = 0
        for piece in pieces:
            if self.closed:
                return
            self._write(piece)
            turn += len(piece)
            if turn >= _TURN_BYTES:
                turn = 0
                if self.transport.get_write_buffer_size() > _WRITE_HIGH:
                    await self._wait_drain()
                await asyncio.sleep(0)

    async def _answer(self, item: _Queued) -> bytes | list[bytes]:
        framing, route, keep_alive = self.framing, item.route, item.keep_alive
        kind = route.kind
        if kind == "message":
            refusal = item.refusal
            if refusal is None:
                read = framing.read(item.body)
                if isinstance(read, Request):
                    outcome = await execute(self.app, self.peer, read.envelope)
                    if outcome.junk:
                        self.addresses.junk(self.address or "")
                    return framing.response_pieces(outcome.response, keep_alive=keep_alive)
                refusal = read
            return framing.refusal(refusal, keep_alive=keep_alive, route=route)
        answer = self.routes.answers.get(kind)
        if answer is not None:
            peer = self.transport.get_extra_info("peername") or ("?",)
            return await answer(HttpRequest(route, item.method, item.headers, item.body or b"", str(peer[0]),
                                            keep_alive, framing))
        if kind == "preflight":
            return framing.preflight(keep_alive=keep_alive)
        if kind == "bad_method":
            return framing.bad_method(route, item.method, keep_alive=keep_alive)
        if kind == "ws":
            return framing.json(426, {"status": "error", "message": f"use a WebSocket at {WS_PATH}"},
                                keep_alive=keep_alive, extra=b"Upgrade: websocket\r\n")
        return framing.not_found(route.path, keep_alive=keep_alive)

    def _hand_over(self, head: bytes) -> None:
        app = self.app
        self._drop_timer()
        self.registry.discard(self)
        if len(app.connections) >= app.config.limits.max_connections:
            # Accounts are free to make, so per-account limits alone do not bound the sockets.
            self._write(self.framing.json(503, {"status": "error", "message": "the server is at "
                                                         "its connection limit; retry later"},
                                                   keep_alive=False))
            self._close_after_write()
            return
        self.closed = True   # this object is done with the transport
        self.watchdog.cancel()
        # The address's count goes with the socket: the WebSocket side releases it when it ends.
        self.address = None
        self.upgrade(self.transport, head + self.upgrade_tail)

    async def _wait_drain(self) -> None:
        if self._paused and not self.closed:
            self._drain = self.loop.create_future()
            await self._drain
            self._drain = None

    # -- ending ------------------------------------------------------------------------------
    def _final(self, answer: bytes, origin: str | None = None) -> None:
        """A last answer, after those already queued; then the connection closes."""
        self.discarding = True
        self.reader.close()
        self._cancel_deadline()
        if origin is None and self.reading is not None:
            origin = self.reading.origin
        self.queue.append(_Queued(_FINAL, body=self._cors(answer, origin)))
        self._start_worker()

    def _finish(self, answer: bytes) -> None:
        self.discarding = True
        self._write(answer)
        self._close_after_write()

    def _cors(self, answer: bytes, origin: str | None) -> bytes:
        """With a list of `--allowed-origins`, the CORS headers name the page's origin, not `*`."""
        if self.origins.any:
            return answer
        return with_origin(answer, self.origins.cors(origin))

    # -- writing, under --write-timeout ----------------------------------------------------
    def _write(self, data: bytes) -> None:
        self.watchdog.count(len(data))
        self.transport.write(data)
        self.watchdog.wrote()

    def _stalled(self, waiting: int) -> None:
        """An answer the client does not read is dropped (also while closing: a close waits for
        the buffer to empty, and must not wait for ever)."""
        if self.closed:
            return
        log.info("dropping an HTTP client whose answer made no progress for %g s (%d bytes waiting)",
                 self.watchdog.timeout, waiting)
        self.app.metrics.http_dropped.labels("write_timeout").inc()
        reset(self.transport)

    def _close_after_write(self) -> None:
        """Close once the answer is out. A client may still be sending a body we will not read:
        closing at once could reset the connection before it reads the answer, so the write
        side is shut first and what arrives is dropped for a short while."""
        self.discarding = True
        self._cancel_deadline()
        transport = self.transport
        if transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, transport.close)
        else:
            transport.close()

    def shutdown(self) -> None:
        """Server stop: an idle connection closes now, a busy one after its current answer."""
        self.shutting_down = True
        if self.worker is None and not self.closed and self.transport is not None:
            self.transport.close()

    # -- time --------------------------------------------------------------------------------
    # A request moves its connection's deadline three times (header, body, idle) and cancels it
    # once: rather than a timer each, one timer stays armed and is moved only when the deadline
    # comes sooner than it; when it fires before the deadline it is armed again for it.
    def _set_deadline(self, seconds: float, *, idle: bool = False) -> None:
        if not (seconds and seconds > 0):
            self._cancel_deadline()
            return
        when = self.loop.time() + seconds
        self._deadline_at, self._deadline_idle = when, idle
        timer = self._deadline
        if timer is None or timer.when() > when:
            if timer is not None:
                timer.cancel()
            self._deadline = self.loop.call_at(when, self._timer_fired)

    def _cancel_deadline(self) -> None:
        self._deadline_at = None   # the armed timer, if any, finds nothing due

    def _drop_timer(self) -> None:
        """The connection is gone: its timer too (it would keep the connection until it fired)."""
        self._deadline_at = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timer_fired(self) -> None:
        self._deadline = None
        when = self._deadline_at
        if when is None or self.closed:
            return
        if when > self.loop.time():
            self._deadline = self.loop.call_at(when, self._timer_fired)
            return
        self._deadline_at = None
        self._expired(self._deadline_idle)

    def _expired(self, idle: bool) -> None:
        if self.closed:
            return
        if self.worker is not None:   # answering: the bound applies once the answers are out
            self._set_deadline(1.0, idle=idle)
            return
        if idle:
            if unsent_bytes(self.transport):
                # The kernel still holds an answer the client never read: a close would keep
                # it (and the socket) until the client reads; a reset frees both.
                self.app.metrics.http_dropped.labels("unread").inc()
                reset(self.transport)
            else:
                self.transport.close()
            return
        # A request that stalled (headers trickled, a body that stopped): dropped.
        self.discarding = True
        self.reader.close()
        self._write(self.framing.json(408, {"status": "error", "message": "request timed out"},
                                      keep_alive=False))
        if self.transport.get_write_buffer_size():
            reset(self.transport)   # a client that does not read either: no waiting on it
        else:
            self.transport.close()


def reset(transport) -> None:
    """Drop the connection with a reset: a plain close (asyncio's abort too) leaves what the
    kernel holds unsent to be delivered, for as long as the client does not read."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


def unsent_bytes(transport) -> int:
    """Bytes written to the socket that its peer has not acknowledged (Linux SIOCOUTQ); 0 when
    unknown."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return 0


_FINAL = Route("final", "")       # queue marker: write this answer, then close
_UPGRADE = Route("upgrade", "")   # queue marker: hand the socket to the WebSocket server

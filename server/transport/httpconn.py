"""HTTP/1.1 on the server's one port: httptools (llhttp) parses, this module moves the bytes and
keeps the time; protocol/framing_http.py decides every answer.

One `HttpConnection` per TCP connection. Requests are answered in order (keep-alive, pipelining
allowed); an action's body is read into memory only up to the frame limit: a declared
Content-Length over it is refused before any of the body is read, and a chunked body is cut
where it crosses the limit. A request whose head or body stalls is dropped after its bound
(`Config.http_header_timeout`, `http_body_timeout`); an idle keep-alive connection after
`http_idle_timeout`. A WebSocket upgrade on `/agents/ws` hands the socket to a websockets
server connection (see server/transport/listener.py), fed the request it already sent.

Against hostile clients (docs/operations.md "Security"): the parser is fed at most
`_FEED_PIECE` bytes at a time, so within one read the head is counted as it arrives (a head over
32 KiB is 431 at once, and so are chunk framing and trailers past the same bound) and at most
`PIPELINE_MAX` requests wait unanswered (the rest of the read waits, unparsed, and the socket
is not read); the answers yield to other clients between each other; answers make progress
within `--write-timeout` or the connection is dropped (and its buffers go back to the system);
requests that are not actions cost the connection's and the address's probe buckets.
"""
from __future__ import annotations

import asyncio
import collections
import fcntl
import logging
import socket
import struct
import termios

import httptools

from seed_agents.protocol.events import error_response
from seed_agents.protocol.framing_http import WS_PATH, HttpFraming, Route, with_origin
from seed_agents.protocol.framing_types import Refusal, Request

from ..operations.health import health
from ..operations.version import VERSION, build_commit
from ..ratelimit import TokenBucket
from ..triggers import webhook
from ..verification.dispatch import execute
from . import memtrim
from .connection import new_connection_id
from .origins import DUPLICATE, REFUSED, policy
from .peers import address_of

log = logging.getLogger("seed_agents.http")


MAX_HEAD_BYTES = 32 * 1024   # request line + headers; more is 431
LINGER_SECONDS = 2.0         # after a refusal with an unread body: read and drop, then close
_PIPELINE_PAUSE = 4          # requests waiting on one connection before it stops being read
PIPELINE_MAX = 16            # requests read and not yet answered; the rest of a read waits unparsed
_FEED_PIECE = 4096           # bytes given to the parser at once (the bounds above hold within a read)
_BODY_PIECE = 64 * 1024      # the same within a body, whose bytes cost a callback per piece
_WRITE_HIGH = 256 * 1024     # a response writer waits while the socket holds more than this
# Per connection, requests that are not actions (the address has its own bucket, --probe-rate).
CONN_PROBE_RATE, CONN_PROBE_BURST = 50.0, 100
CHUNK_FRAMING = 16           # bytes of chunk framing allowed per chunk beyond MAX_HEAD_BYTES
# Route kinds that are not probes: actions, which have their buckets (server/verification/dispatch.py); an
# area whose requests are limited on their own terms adds its kinds here.
_NOT_PROBES = frozenset({"message", "hook"})   # webhooks have their own rate limit
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


class _Stop(Exception):
    """Raised from a parser callback to stop reading this connection."""


class HttpConnection(asyncio.Protocol):
    def __init__(self, app, framing: HttpFraming, server, upgrade) -> None:
        self.app = app
        self.framing = framing
        self.server = server              # http_connections, handler_tasks (waited for at stop)
        self.registry: set = server.http_connections
        self.upgrade = upgrade            # (transport, bytes of the request and after) -> None
        cfg = app.config
        self.header_timeout = cfg.http_header_timeout
        self.body_timeout = cfg.http_body_timeout
        self.idle_timeout = cfg.http_idle_timeout
        self.max_frame = cfg.limits.max_frame
        self.origins = policy(cfg.allowed_origins)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.peer = HttpPeer(TokenBucket(cfg.limits.rate_per_second, cfg.limits.rate_burst))
        self.probes = TokenBucket(CONN_PROBE_RATE, CONN_PROBE_BURST)
        self.addresses = server.addresses
        self.address: str | None = None   # counted in `addresses` until this connection ends
        self.write_timeout = cfg.write_timeout
        self.written = 0                  # bytes handed to the transport, ever
        self._watchdog: asyncio.TimerHandle | None = None
        self._accepted_at_check = 0
        self.pending = b""                # bytes read and not yet given to the parser
        self.phase = "idle"               # of the request being parsed: idle, head, body
        self.head_fed = 0                 # bytes given to the parser within an unfinished head
        self.framing_fed = 0              # chunk framing and trailer bytes of the current body
        self.chunks = 0
        self._piece_body = 0
        self._completed = False
        self.queue: collections.deque = collections.deque()   # requests complete, not yet answered
        self.worker: asyncio.Task | None = None
        self.closed = False
        self.discarding = False      # a final answer is decided: read and drop the rest
        self.upgraded = False
        self.shutting_down = False
        self.in_request = False      # between a request's first byte and its last
        self.eof = False
        self.upgrade_tail = b""
        self._paused_reading = False
        self._deadline: asyncio.TimerHandle | None = None
        self._paused = False
        self._drain: asyncio.Future | None = None
        self._reset_request()

    def _reset_request(self) -> None:
        self.url = bytearray()
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.route: Route | None = None
        self.body: list[bytes] = []
        self.body_size = 0
        self.refusal: Refusal | None = None
        self.origin: str | None = None    # the Origin header, when the request has one

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
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
        self._cancel_deadline()
        self._cancel_watchdog()
        if self.address is not None:
            self.addresses.release(self.address)
            self.address = None
        self.queue.clear()            # nothing that was not started runs for a gone client
        self.pending = b""
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        memtrim.soon()   # what its buffers held (an answer it never read) goes back to the system

    def data_received(self, data: bytes) -> None:
        if self.upgraded:
            self.upgrade_tail += data
            return
        if self.discarding or self.closed:
            return   # a final answer is decided: what still arrives is dropped, never kept
        self.pending = self.pending + data if self.pending else data
        self._feed()

    def _feed(self) -> None:
        """Give the parser what was read, a piece at a time: between pieces the head and chunk
        framing are counted and the pipeline bound is checked (past it the rest waits here,
        and the socket is not read, until answers have gone out)."""
        data, pos = self.pending, 0
        try:
            while pos < len(data) and not (self.discarding or self.closed or self.upgraded):
                if len(self.queue) >= PIPELINE_MAX:
                    self._pause_reading()
                    break
                piece = memoryview(data)[pos:pos + (_BODY_PIECE if self.phase == "body" else _FEED_PIECE)]
                before = self.phase
                self._completed = False
                self._piece_body = 0
                try:
                    self.parser.feed_data(piece)
                    pos += len(piece)
                except httptools.HttpParserUpgrade as exc:
                    # The parser stops after a request that asks to switch protocols.
                    pos += exc.args[0]
                    if self.upgraded:   # to the WebSocket: the rest is the socket's
                        self.upgrade_tail = data[pos:] + self.upgrade_tail
                        pos = len(data)
                        break
                    continue   # an Upgrade header on another path, with no body: plain HTTP
                except httptools.HttpParserCallbackError:
                    pos = len(data)
                    break   # _Stop from a callback: the answer is already decided
                except httptools.HttpParserError as exc:
                    pos = len(data)
                    self._final(self.framing.json(400, {"status": "error", "message": f"malformed HTTP request: {exc}"},
                                                  keep_alive=False))
                    break
                if not self._completed and self._count_piece(before, len(piece)):
                    pos = len(data)
                    break
        finally:
            self.pending = data[pos:] if pos < len(data) and not self.discarding else b""

    def _count_piece(self, before: str, size: int) -> bool:
        """Count a piece that ended no request: all head, or all body and its framing. True when
        a bound is crossed (the 431 is queued)."""
        if self.phase == "head":
            self.head_fed += size
            if self.head_fed > MAX_HEAD_BYTES:
                self._final(self._head_too_large())
                return True
        elif self.phase == "body" and before == "body":
            self.framing_fed += size - self._piece_body
            if self.framing_fed > MAX_HEAD_BYTES + CHUNK_FRAMING * self.chunks:
                self._final(self.framing.json(431, {"status": "error", "message": "chunk framing and trailers "
                                                   f"over {MAX_HEAD_BYTES} bytes"}, keep_alive=False))
                return True
        return False

    def _head_too_large(self) -> bytes:
        return self.framing.json(431, {"status": "error", "message": f"request head over {MAX_HEAD_BYTES} bytes"},
                                 keep_alive=False)

    def _pause_reading(self) -> None:
        if not self._paused_reading and not self.closed:
            self._paused_reading = True
            self.transport.pause_reading()

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

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._reset_request()
        self.in_request = True
        self.phase = "head"
        self.head_fed = self.framing_fed = self.chunks = 0
        self._set_deadline(self.header_timeout)

    def on_chunk_header(self) -> None:
        self.chunks += 1

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self._count_head(len(name) + len(value) + 4)

    def _count_head(self, n: int) -> None:
        self.head_bytes += n
        if self.head_bytes > MAX_HEAD_BYTES:
            self._final(self._head_too_large())
            raise _Stop

    def on_headers_complete(self) -> None:
        self.phase = "body"
        self.head_fed = 0
        self._check_any_head()
        method = self.parser.get_method().decode("latin-1")
        url = self.url.decode("latin-1")
        self.route = route = webhook.hook_route(method, url) or self.framing.route_request(method, url, self.headers)
        if route.kind == "hook":   # server/triggers/webhook.py: its own body cap, checked here
            self._hook_body_cap(next((int(v) for n, v in self.headers if n.lower() == b"content-length"), 0))
        if route.kind != "message":
            self._set_deadline(self.body_timeout)
            return
        content_type = content_length = origin = None
        expect = b""
        for name, value in self.headers:
            lname = name.lower()
            if lname == b"content-type":
                content_type = value.decode("latin-1")
            elif lname == b"content-length":
                content_length = int(value)   # llhttp has checked it is a number
            elif lname == b"expect":
                expect = value.lower()
            elif lname == b"origin":
                origin = value.decode("latin-1")
        refusal = self.framing.check_head(content_type, content_length)
        if refusal is None and not self.origins.allows(origin):
            refusal = Refusal(None, error_response(403, REFUSED))
        if refusal is not None and refusal.value["status"] == 413:
            # Answered now; the body is never read (the connection closes after the answer).
            self._final(self.framing.refusal(refusal, keep_alive=False, route=route))
            raise _Stop
        if refusal is not None and expect == b"100-continue":
            # The client waits for 100 Continue before it sends the body: its refusal instead,
            # at once, and the connection closes (the body is never read).
            self._final(self.framing.refusal(refusal, keep_alive=False, route=route))
            raise _Stop
        if refusal is None and not self.addresses.junk_ready(self.address or ""):
            # This address's actions keep failing verification: no more of its bodies are read
            # (each costs at least a hash of up to a megabyte) until its bucket refills.
            self._final(self.framing.refusal(Refusal(None, error_response(429, JUNK_REFUSED)), keep_alive=False,
                                             route=route))
            raise _Stop
        self.refusal = refusal
        if refusal is None and expect == b"100-continue" and not self.queue and self.worker is None:
            self._write(self.framing.continue_())
        self._set_deadline(self.body_timeout)

    def _check_any_head(self) -> None:
        """Checks every request's head passes, whatever its route: one Origin at most (its
        value kept for the CORS headers), and no body behind a request that asks to switch
        protocols. A refusal is queued and _Stop raised."""
        origin, origins, body = None, 0, False
        for name, value in self.headers:
            lname = name.lower()
            if lname == b"origin":
                origin = value.decode("latin-1")
                origins += 1
            elif lname == b"transfer-encoding" or (lname == b"content-length" and int(value) > 0):
                body = True
        self.origin = origin
        if origins > 1:
            # Which one would a check read? Refused outright (a browser sends one).
            self._final(self.framing.json(400, {"status": "error", "message": DUPLICATE}, keep_alive=False))
            raise _Stop
        if body and self.parser.should_upgrade():
            # The parser skips the body of a request that switches protocols and would read it
            # as the next request: a proxy's rules could be bypassed that way. Refused.
            self._final(self.framing.json(400, {"status": "error", "message": "a request asking to upgrade "
                                               "the connection may not have a body"}, keep_alive=False))
            raise _Stop

    def on_body(self, data: bytes) -> None:
        self._piece_body += len(data)
        if self.route is not None and self.route.kind == "hook":
            self.body_size += len(data)
            self._hook_body_cap(self.body_size)
            self.body.append(data)
            return
        if self.route is None or self.route.kind != "message" or self.refusal is not None:
            return   # a body nobody reads is dropped as it comes
        self.body_size += len(data)
        if self.body_size > self.max_frame and self.body_size > self.framing.body_limit(self.body or [data]):
            self.body = []
            self._final(self.framing.refusal(self.framing.body_too_large(self.body_size), keep_alive=False))
            raise _Stop
        self.body.append(data)

    def _hook_body_cap(self, size: int) -> None:
        cap = self.app.config.webhook_max_body
        if size > cap:
            self.body = []
            self._final(self.framing.json(413, {"status": "error", "message": f"webhook body of {size} bytes "
                                                f"is over the limit of {cap}"}, keep_alive=False))
            raise _Stop

    def on_message_complete(self) -> None:
        self._cancel_deadline()
        self.in_request = False
        self.phase = "idle"
        self._completed = True
        route = self.route
        keep_alive = self.parser.should_keep_alive() and not self.shutting_down
        upgrade = route.kind == "ws" and self.parser.should_upgrade()
        if route.kind not in _NOT_PROBES and not upgrade and not self._probe_allowed():
            self._final(self.framing.too_many_probes())
            raise _Stop
        if route.kind == "ws" and self.parser.should_upgrade():
            self.queue.append((_UPGRADE, "GET", self._request_head(), False))
            self.upgraded = True
            self.transport.pause_reading()   # what follows is the WebSocket's, read after the handover
            self._start_worker()
            return
        body = b"".join(self.body) if route.kind in ("message", "hook") else None
        method = self.parser.get_method().decode("latin-1")
        extra = self.headers if route.kind in ("hook", "hook_method") else self.refusal
        self.queue.append((route, method, (extra, body), keep_alive, self.origin))
        self._reset_request()
        if not keep_alive:
            self.discarding = True   # nothing after a `Connection: close` request is read
        if len(self.queue) >= _PIPELINE_PAUSE:
            self._pause_reading()
        self._start_worker()

    def _probe_allowed(self) -> bool:
        """A request that is not an action (health, version, metrics, preflight, 404...) costs
        a token of this connection and one of its address."""
        return self.probes.take() and self.addresses.probe(self.address or "")

    def _request_head(self) -> bytes:
        version = self.parser.get_http_version()
        lines = [b"%s %s HTTP/%s\r\n" % (self.parser.get_method(), bytes(self.url), version.encode())]
        lines += [name + b": " + value + b"\r\n" for name, value in self.headers]
        lines.append(b"\r\n")
        return b"".join(lines)

    # -- answering -------------------------------------------------------------------------
    def _start_worker(self) -> None:
        if self.worker is None:
            self.worker = self.loop.create_task(self._answer_queued())
            self.server.handler_tasks.add(self.worker)

    async def _answer_queued(self) -> None:
        try:
            while self.queue and not self.closed:
                route, method, payload, keep_alive, *origin = self.queue.popleft()
                if route is _UPGRADE:
                    self._hand_over(payload)
                    return
                if route is _FINAL:
                    self._write(payload)
                    self._close_after_write()
                    return
                answer = await self._answer(route, method, payload, keep_alive)
                if self.closed:
                    return
                self._write(self._cors(answer, origin[0] if origin else None))
                if not keep_alive:
                    self._close_after_write()
                    return
                if self.transport.get_write_buffer_size() > _WRITE_HIGH:
                    await self._wait_drain()   # bounded: the write watchdog drops a peer that stalls
                # Pipelined answers take turns with every other client's work.
                await asyncio.sleep(0)
                if self.pending and len(self.queue) < PIPELINE_MAX and not self.closed:
                    self._feed()   # what waited unparsed behind the pipeline bound
            if self._paused_reading and not self.closed and not self.pending:
                self._paused_reading = False
                self.transport.resume_reading()
            if not self.closed and not self.in_request:
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

    async def _answer(self, route: Route, method: str, payload, keep_alive: bool) -> bytes:
        framing, app = self.framing, self.app
        kind = route.kind
        if kind == "message":
            refusal, body = payload
            if refusal is None:
                read = framing.read(body)
                if isinstance(read, Request):
                    outcome = await execute(app, self.peer, read.envelope)
                    if outcome.junk:
                        self.addresses.junk(self.address or "")
                    return framing.response(outcome.response, keep_alive=keep_alive)
                refusal = read
            return framing.refusal(refusal, keep_alive=keep_alive, route=route)
        if kind == "index":
            return framing.index(route, {"version": VERSION, "schemaVersion": app.db.schema_version,
                                         "uptime": round(app.uptime(), 3), "commit": build_commit()},
                                 keep_alive=keep_alive)
        if kind in ("hook", "hook_method"):
            headers, body = payload
            peer = self.transport.get_extra_info("peername") or ("?",)
            return await webhook.answer(app, framing, route.path, method, headers, body or b"", str(peer[0]),
                                        keep_alive)
        if kind == "health":
            return framing.json(200, health(app, VERSION), keep_alive=keep_alive)
        if kind == "version":
            value = {"version": VERSION, "schemaVersion": app.db.schema_version, "storage": app.db.backend}
            if build_commit():
                value["commit"] = build_commit()
            return framing.json(200, value, keep_alive=keep_alive)
        if kind == "metrics":
            return framing.http_message(200, app.metrics.render(), app.metrics.content_type, keep_alive=keep_alive)
        if kind == "preflight":
            return framing.preflight(keep_alive=keep_alive)
        if kind == "bad_method":
            return framing.bad_method(route, method, keep_alive=keep_alive)
        if kind == "ws":
            return framing.json(426, {"status": "error", "message": f"use a WebSocket at {WS_PATH}"},
                                keep_alive=keep_alive, extra=b"Upgrade: websocket\r\n")
        return framing.not_found(route.path, keep_alive=keep_alive)

    def _hand_over(self, head: bytes) -> None:
        app = self.app
        self._cancel_deadline()
        self.registry.discard(self)
        if len(app.connections) >= app.config.limits.max_connections:
            # Accounts are free to make, so per-account limits alone do not bound the sockets.
            self._write(self.framing.json(503, {"status": "error", "message": "the server is at "
                                                         "its connection limit; retry later"},
                                                   keep_alive=False))
            self._close_after_write()
            return
        self.closed = True   # this object is done with the transport
        self._cancel_watchdog()
        # The address's count goes with the socket: the WebSocket side releases it when it ends.
        self.address = None
        self.upgrade(self.transport, head + getattr(self, "upgrade_tail", b""))

    async def _wait_drain(self) -> None:
        if self._paused and not self.closed:
            self._drain = self.loop.create_future()
            await self._drain
            self._drain = None

    # -- ending ------------------------------------------------------------------------------
    def _final(self, answer: bytes) -> None:
        """A last answer, after those already queued; then the connection closes."""
        self.discarding = True
        self.pending = b""
        self._cancel_deadline()
        self.queue.append((_FINAL, "", self._cors(answer, self.origin), False))
        self._start_worker()

    def _finish(self, answer: bytes) -> None:
        self.discarding = True
        self._write(answer)
        self._close_after_write()

    def _cors(self, answer: bytes, origin: str | None) -> bytes:
        """With `--allowed-origins` set, the CORS headers name the request's origin, not `*`."""
        if self.origins.any:
            return answer
        return with_origin(answer, self.origins.matched(origin))

    # -- writing, under --write-timeout ----------------------------------------------------
    def _write(self, data: bytes) -> None:
        self.written += len(data)
        self.transport.write(data)
        if self._watchdog is None and self.transport.get_write_buffer_size():
            self._arm_watchdog()

    def _accepted(self) -> int:
        """Bytes the kernel has taken from us, ever."""
        return self.written - self.transport.get_write_buffer_size()

    def _arm_watchdog(self) -> None:
        if self.write_timeout and self.write_timeout > 0:
            self._accepted_at_check = self._accepted()
            self._watchdog = self.loop.call_later(self.write_timeout, self._check_progress)

    def _check_progress(self) -> None:
        """An answer the client does not read is dropped (also while closing: a close waits for
        the buffer to empty, and must not wait for ever)."""
        self._watchdog = None
        if self.closed or not self.transport.get_write_buffer_size():
            return
        if self._accepted() > self._accepted_at_check:
            self._arm_watchdog()
            return
        log.info("dropping an HTTP client whose answer made no progress for %g s (%d bytes waiting)",
                 self.write_timeout, self.transport.get_write_buffer_size())
        self.app.metrics.http_dropped.labels("write_timeout").inc()
        reset(self.transport)

    def _cancel_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

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
    def _set_deadline(self, seconds: float, *, idle: bool = False) -> None:
        self._cancel_deadline()
        if seconds and seconds > 0:
            self._deadline = self.loop.call_later(seconds, self._expired, idle)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, idle: bool) -> None:
        self._deadline = None
        if self.closed:
            return
        if self.worker is not None:   # answering: the bound applies once the answers are out
            self._deadline = self.loop.call_later(1.0, self._expired, idle)
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
        self.pending = b""
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

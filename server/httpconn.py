"""HTTP/1.1 on the server's one port: httptools (llhttp) parses, this module moves the bytes and
keeps the time; protocol/framing_http.py decides every answer.

One `HttpConnection` per TCP connection. Requests are answered in order (keep-alive, pipelining
allowed); an action's body is read into memory only up to the frame limit: a declared
Content-Length over it is refused before any of the body is read, and a chunked body is cut
where it crosses the limit. A request whose head or body stalls is dropped after its bound
(`Config.http_header_timeout`, `http_body_timeout`); an idle keep-alive connection after
`http_idle_timeout`. A WebSocket upgrade on `/agents/ws` hands the socket to a websockets
server connection (see server/transport.py), fed the request it already sent.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import subprocess
from pathlib import Path

import httptools

from protocol.framing_http import WS_PATH, HttpFraming, Route
from protocol.framing_types import Refusal, Request
from server.connection import new_connection_id
from server.dispatch import execute
from server.health import health
from server.origins import REFUSED, policy
from protocol.events import error_response
from server.ratelimit import TokenBucket
from server.triggers import webhook

log = logging.getLogger("seed_agents.http")

VERSION = "0.1.0"

MAX_HEAD_BYTES = 32 * 1024   # request line + headers; more is 431
LINGER_SECONDS = 2.0         # after a refusal with an unread body: read and drop, then close
_PIPELINE_PAUSE = 4          # requests waiting on one connection before it stops being read
_WRITE_HIGH = 256 * 1024     # a response writer waits while the socket holds more than this


class HttpPeer:
    """What the verification pipeline needs of a connection, for HTTP: one per TCP connection
    (for the replay rule a keep-alive connection is one connection), bound to no account (an
    HTTP request stands alone)."""

    __slots__ = ("id", "account_id", "own_bucket")
    transport = "http"   # for the access log

    def __init__(self, bucket: TokenBucket) -> None:
        self.id = new_connection_id()
        self.account_id = None
        self.own_bucket = bucket   # every request costs it, verified or not

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

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.registry.add(self)
        limit = self.app.config.limits.max_connections
        if len(self.registry) > limit:
            self._finish(self.framing.json(503, {"status": "error", "message": "the server is at its "
                                                 "connection limit; retry later"}, keep_alive=False))
            return
        self._set_deadline(self.idle_timeout, idle=True)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.registry.discard(self)
        self._cancel_deadline()
        self.queue.clear()            # nothing that was not started runs for a gone client
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self.upgraded:
            self.upgrade_tail += data
            return
        while data and not (self.discarding or self.closed):
            try:
                self.parser.feed_data(data)
                return
            except httptools.HttpParserUpgrade as exc:
                # The parser stops after a request that asks to switch protocols.
                tail = data[exc.args[0]:]
                if self.upgraded:   # to the WebSocket: the rest is the socket's
                    self.upgrade_tail = tail + self.upgrade_tail
                    return
                data = tail   # an Upgrade header on another path: answered as plain HTTP
            except httptools.HttpParserCallbackError:
                return   # _Stop from a callback: the answer is already decided
            except httptools.HttpParserError as exc:
                self._final(self.framing.json(400, {"status": "error", "message": f"malformed HTTP request: {exc}"},
                                              keep_alive=False))
                return

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
        self._set_deadline(self.header_timeout)

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        self._count_head(len(name) + len(value) + 4)

    def _count_head(self, n: int) -> None:
        self.head_bytes += n
        if self.head_bytes > MAX_HEAD_BYTES:
            self._final(self.framing.json(431, {"status": "error", "message": "request head over "
                                               f"{MAX_HEAD_BYTES} bytes"}, keep_alive=False))
            raise _Stop

    def on_headers_complete(self) -> None:
        method = self.parser.get_method().decode("latin-1")
        url = self.url.decode("latin-1")
        self.route = route = webhook.hook_route(method, url) or self.framing.route(method, url)
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
            self._final(self.framing.refusal(refusal, keep_alive=False))
            raise _Stop
        self.refusal = refusal
        if refusal is None and expect == b"100-continue" and not self.queue and self.worker is None:
            self.transport.write(self.framing.continue_())
        self._set_deadline(self.body_timeout)

    def on_body(self, data: bytes) -> None:
        if self.route is not None and self.route.kind == "hook":
            self.body_size += len(data)
            self._hook_body_cap(self.body_size)
            self.body.append(data)
            return
        if self.route is None or self.route.kind != "message" or self.refusal is not None:
            return   # a body nobody reads is dropped as it comes
        self.body_size += len(data)
        if self.body_size > self.max_frame:
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
        route = self.route
        keep_alive = self.parser.should_keep_alive() and not self.shutting_down
        if route.kind == "ws" and self.parser.should_upgrade():
            self.queue.append((_UPGRADE, "GET", self._request_head(), False))
            self.upgraded = True
            self.transport.pause_reading()   # what follows is the WebSocket's, read after the handover
            self._start_worker()
            return
        body = b"".join(self.body) if route.kind in ("message", "hook") else None
        method = self.parser.get_method().decode("latin-1")
        extra = self.headers if route.kind in ("hook", "hook_method") else self.refusal
        self.queue.append((route, method, (extra, body), keep_alive))
        self._reset_request()
        if not keep_alive:
            self.discarding = True   # nothing after a `Connection: close` request is read
        if len(self.queue) >= _PIPELINE_PAUSE:
            self.transport.pause_reading()
            self._paused_reading = True
        self._start_worker()

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
                route, method, payload, keep_alive = self.queue.popleft()
                if route is _UPGRADE:
                    self._hand_over(payload)
                    return
                if route is _FINAL:
                    self.transport.write(payload)
                    self._close_after_write()
                    return
                answer = await self._answer(route, method, payload, keep_alive)
                if self.closed:
                    return
                self.transport.write(answer)
                if not keep_alive:
                    self._close_after_write()
                    return
                if self.transport.get_write_buffer_size() > _WRITE_HIGH:
                    await self._wait_drain()
            if self._paused_reading and not self.closed:
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
                    return framing.response(outcome.response, keep_alive=keep_alive)
                refusal = read
            return framing.refusal(refusal, keep_alive=keep_alive)
        if kind in ("hook", "hook_method"):
            headers, body = payload
            peer = self.transport.get_extra_info("peername") or ("?",)
            return await webhook.answer(app, framing, route.path, method, headers, body or b"", str(peer[0]),
                                        keep_alive)
        if kind == "health":
            return framing.json(200, health(app, VERSION), keep_alive=keep_alive)
        if kind == "version":
            value = {"version": VERSION, "schemaVersion": app.db.schema_version}
            if build_commit():
                value["commit"] = build_commit()
            return framing.json(200, value, keep_alive=keep_alive)
        if kind == "metrics":
            return framing.answer(200, app.metrics.render(), app.metrics.content_type, keep_alive=keep_alive)
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
            self.transport.write(self.framing.json(503, {"status": "error", "message": "the server is at "
                                                         "its connection limit; retry later"},
                                                   keep_alive=False))
            self._close_after_write()
            return
        self.closed = True   # this object is done with the transport
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
        self._cancel_deadline()
        self.queue.append((_FINAL, "", answer, False))
        self._start_worker()

    def _finish(self, answer: bytes) -> None:
        self.discarding = True
        self.transport.write(answer)
        self._close_after_write()

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
            self.transport.close()
            return
        # A request that stalled (headers trickled, a body that stopped): dropped.
        self.discarding = True
        self.transport.write(self.framing.json(408, {"status": "error", "message": "request timed out"},
                                               keep_alive=False))
        if self.transport.get_write_buffer_size():
            self.transport.abort()   # a client that does not read either: no waiting on it
        else:
            self.transport.close()


_FINAL = Route("final", "")       # queue marker: write this answer, then close
_UPGRADE = Route("upgrade", "")   # queue marker: hand the socket to the WebSocket server


@functools.cache
def build_commit() -> str | None:
    """The commit this server runs, when known: SEED_AGENTS_COMMIT, else the checkout's HEAD."""
    commit = os.environ.get("SEED_AGENTS_COMMIT")
    if commit:
        return commit
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None

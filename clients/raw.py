"""A raw WebSocket client for both framings: it sends exact bytes (signed or not, canonical or
not) and shows exactly what comes back, in order. The tests use it to speak the wire where the
library client (`seed_agents.clients.client`) always does the right thing; the benchmarks use it to drive
load without paying for decoding each answer.

It lives in `clients/` because it is a client: it depends on `protocol/`, `seed_agents.clients.wire` and
`websockets` only, so `tests/` and `bench/` can both import it without importing each other.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import time
from typing import Any

from websockets.asyncio.client import connect as ws_connect
from websockets.utils import apply_mask  # the library's C helper when it is built

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.v2 import peek_id

from .wire import SUBPROTOCOL as V2
from .wire import decode_frame

__all__ = ["V1", "V2", "RawV2", "connect", "now_ms", "unique_ts", "signed_request_frame",
           "response_id", "tcp_handshake", "client_frame", "parse_server_frame"]

# The canonical head of `{id, envelope}` around bytes that are already a signed envelope.
_MAP2 = dagcbor.encode_head(5, 2)
_ID_KEY = dagcbor.encode({"id": 0})[1:-1]              # the text "id" with its head
_ENVELOPE_KEY = dagcbor.encode({"envelope": 0})[1:-1]  # the text "envelope" with its head
_RESPONSE_KEY = dagcbor.encode({"response": 0})[1:-1]
_ERROR_HEAD = dagcbor.encode({"_": "Error"})[1:]       # `_: "Error"`, first key of an Error
_RESPONSE_KEY_LEN = len(_RESPONSE_KEY)
_EXTRA = (0,) * 24 + (1, 2, 4, 8) + (0,) * 4            # bytes after a uint head, by its low bits


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_last_ts = [0]


def unique_ts() -> int:
    """A ts never handed out before in this process (Ed25519 is deterministic: two identical
    actions signed in one millisecond would be byte-identical, and the second a replay)."""
    ts = max(now_ms(), _last_ts[0] + 1)
    _last_ts[0] = ts
    return ts


def signed_request_frame(req_id: int, envelope: bytes) -> bytes:
    """The canonical v2 request `{id, envelope}` around an already signed envelope (its
    DAG-CBOR bytes), without decoding and re-encoding it."""
    return b"".join((_MAP2, _ID_KEY, dagcbor.encode_head(0, req_id), _ENVELOPE_KEY, envelope))


def response_id(frame: bytes) -> tuple[int, bool] | None:
    """(id, is_error) of a v2 response frame, read from its head without decoding the rest;
    None for an event. An event map's first key is `_`, which sorts before `id`, so only
    responses start with `id`."""
    req_id = peek_id(frame)
    if req_id is None:
        return None
    pos = 5 + _EXTRA[frame[4] & 0x1F]                 # past the id's head and value
    if not frame.startswith(_RESPONSE_KEY, pos):
        return None
    pos += _RESPONSE_KEY_LEN + 1                      # skip the response map's own head
    return req_id, frame.startswith(_ERROR_HEAD, pos)


async def connect(url: str, **kw):
    """A raw v2 socket: no compression, no size limit, no client pings unless asked."""
    options: dict[str, Any] = {"subprotocols": [V2], "max_size": None, "compression": None,
               "ping_interval": None, "open_timeout": 30, "close_timeout": 2, "proxy": None}
    options.update(kw)
    ws = await ws_connect(url, **options)
    if ws.subprotocol != V2:
        await ws.close()
        raise ConnectionError(f"the server chose subprotocol {ws.subprotocol!r}, not {V2}")
    return ws


class RawV2:
    """A v2 socket that matches responses to requests by id. Every other frame (events, and any
    response nobody waits for) goes to `on_event`, in arrival order. With `log` set, every frame
    received is appended to it, so a test can see what arrived between two answers.

    `decode=False` (load generators) hands out raw frames: a response's id is read from its
    head and nothing else is decoded. `decode=True` (tests) hands out decoded values: the
    `response` map of an answer, the whole map of an event."""

    def __init__(self, ws, on_event=None, *, decode: bool = False, log: list | None = None) -> None:
        self.ws = ws
        self.on_event = on_event
        self.decode = decode
        self.log = log
        self.next_id = 1
        self.responses: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str, on_event=None, **kw) -> "RawV2":
        options = {k: kw.pop(k) for k in ("decode", "log") if k in kw}
        return cls(await connect(url, **kw), on_event, **options)

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if self.log is not None:
                    self.log.append(frame)
                rid = response_id(frame)
                fut = self.responses.pop(rid[0], None) if rid is not None else None
                if fut is None:
                    if self.on_event is not None:
                        self.on_event(decode_frame(frame) if self.decode else frame)
                elif not fut.done():
                    fut.set_result(decode_frame(frame)["response"] if self.decode else frame)
        except Exception as exc:  # noqa: BLE001 - the socket closed: fail what waits
            for fut in self.responses.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"socket closed: {exc!r}"))

    def register(self, req_id: int | None = None) -> tuple[int, asyncio.Future]:
        """A request id (a fresh one unless given) and the future its response will resolve."""
        if req_id is None:
            req_id = self.next_id
            self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.responses[req_id] = fut
        return req_id, fut

    async def request(self, envelope: bytes | dict, *, req_id: int | None = None,
                      timeout: float = 30.0):
        """Send a signed envelope (its bytes, or the map, which is encoded as it is) in a
        canonical `{id, envelope}`; returns the answer."""
        if not isinstance(envelope, (bytes, bytearray)):
            envelope = dagcbor.encode(envelope)
        req_id, fut = self.register(req_id)
        await self.ws.send(signed_request_frame(req_id, envelope))
        return await asyncio.wait_for(fut, timeout)

    async def raw(self, frame: bytes, req_id: int | None = None, timeout: float = 30.0):
        """Send exact bytes; with `req_id`, wait for the answer carrying that id."""
        if req_id is None:
            await self.ws.send(frame)
            return None
        _, fut = self.register(req_id)
        await self.ws.send(frame)
        return await asyncio.wait_for(fut, timeout)

    async def call(self, kp: Keypair, action: dict, *, timeout: float = 30.0, **kw) -> dict:
        """Sign `action` now (with a ts of its own unless given) and send it; returns the
        decoded response, an Error included."""
        kw.setdefault("ts", unique_ts())
        answer = await self.request(sign_envelope(kp, action, **kw), timeout=timeout)
        return answer if self.decode else decode_frame(answer)["response"]

    async def close(self) -> None:
        self.reader.cancel()
        try:
            await asyncio.wait_for(self.ws.close(), 5)
        except Exception:  # noqa: BLE001 - already closed or gone: nothing to release
            pass


class V1:
    """A v1 (JSON, unversioned) socket: signed envelopes out, JSON frames back, in order."""

    def __init__(self, ws) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, url: str, **kw) -> "V1":
        options = {"max_size": None, "compression": None, "proxy": None}
        options.update(kw)
        ws = await ws_connect(url, **options)
        self = cls(ws)
        hello = await self.recv()
        if hello.get("_") != "connected":
            raise ConnectionError(f"expected the v1 greeting, got {hello!r}")
        return self

    async def send(self, kp: Keypair, action: dict, **kw) -> dict:
        """Sign `action` now (with a ts of its own unless given) and send it; returns the next
        frame (the answer, unless events come first)."""
        kw.setdefault("ts", unique_ts())
        await self.ws.send(sign_envelope(kp, action, **kw))
        return await self.recv()

    async def recv(self, timeout: float = 10) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def close(self) -> None:
        await self.ws.close()


# -- below the websockets library: a bare TCP socket speaking RFC 6455 ------------------------
# For clients that must control the socket itself: one that reads nothing with a tiny receive
# buffer (a stalled consumer), or one load process reading thousands of sockets from callbacks.

async def tcp_handshake(host: str, port: int, *, path: str = "/agents/ws",
                        subprotocol: str | None = V2, rcvbuf: int | None = None,
                        timeout: float = 30.0) -> tuple[socket.socket, bytes]:
    """Open a non-blocking TCP socket and upgrade it to a WebSocket; returns the socket and any
    bytes that came after the 101 answer (the first frames)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)   # before connect
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if subprotocol:
            lines.append(f"Sec-WebSocket-Protocol: {subprotocol}")
        await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), timeout)
            if not chunk:
                raise ConnectionError("closed during the WebSocket handshake")
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        text = head.decode("latin-1")
        if not text.startswith("HTTP/1.1 101") or (subprotocol and subprotocol not in text):
            raise ConnectionError(text.splitlines()[0] if text else "no handshake answer")
        return sock, rest
    except BaseException:
        sock.close()
        raise


def client_frame(payload: bytes, opcode: int = 0x2) -> bytes:
    """One final, masked client frame (a client must mask, RFC 6455 section 5.3)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    mask = os.urandom(4)
    return head + mask + apply_mask(payload, mask)


def parse_server_frame(buf, pos: int = 0) -> tuple[int, bytes, int] | None:
    """(opcode, payload, end) of the server frame (unmasked, unfragmented) starting at `pos` of
    `buf`, or None while it is not all there."""
    n = len(buf)
    if n - pos < 2:
        return None
    opcode, size, hdr = buf[pos] & 0x0F, buf[pos + 1] & 0x7F, 2
    if size == 126:
        if n - pos < 4:
            return None
        size, hdr = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
    elif size == 127:
        if n - pos < 10:
            return None
        size, hdr = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
    end = pos + hdr + size
    if n < end:
        return None
    return opcode, bytes(buf[pos + hdr:end]), end

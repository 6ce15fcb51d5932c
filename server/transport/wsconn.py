"""The server's WebSocket connection, built on websockets' public sans-I/O `ServerProtocol`:
the protocol parses the handshake and the frames, answers pings, and runs the closing
handshake; this asyncio protocol keeps only the time, the bytes in and the writes out.

- One writer: every byte this connection puts on the transport goes through `_write`: the
  socket's outbound queue hands it prebuilt frames (`write_frames`; `protocol/wire/ws_frame.py`
  puts the RFC 6455 header on a framing's message, once per event, shared by every socket), and
  what the protocol itself has to send (the handshake's answer, pongs, keepalive pings, close
  frames) leaves through `_flush` right after the call that made it. Data frames are never given
  to the protocol, which keeps no state about them (server frames are unmasked and we never
  fragment), so the two cannot interleave inside a message.
- Messages: data frames are joined here (fragments of one message, up to the protocol's
  `max_size`, which closes 1009 past it), text is checked as UTF-8 as it arrives (1007), and the
  queue of whole messages waiting for the reader is bounded in messages and in bytes: past either
  bound reading stops, and it also stops while the write buffer is over its high-water mark (so a
  ping flood whose pongs are never read cannot grow it).
- A peer whose writes make no progress for `write_timeout` seconds is dropped (the transport is
  aborted), whatever is waiting (the watchdog of server/transport/watchdog.py, the one HTTP
  connections use too).
- Keepalive: a ping every `ping_interval`; no pong within `ping_timeout` closes 1011.
"""
from __future__ import annotations

import asyncio
import codecs
import collections
import http
import logging
import os

from websockets.exceptions import InvalidState
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import CONNECTING, OPEN
from websockets.server import ServerProtocol

from .watchdog import WriteWatchdog

log = logging.getLogger("seed_agents.wsconn")

__all__ = ["WsConnection", "FRAME_OVERHEAD", "WRITE_HIGH", "WRITE_LOW"]

# What one queued inbound message costs besides its payload (the object, the deque slot).
FRAME_OVERHEAD = 200
# The transport's write buffer: above WRITE_HIGH the connection stops reading and writers wait;
# below WRITE_LOW they resume.
WRITE_HIGH = 64 * 1024
WRITE_LOW = 16 * 1024

_QUEUE = 1   # reasons reading is paused: the inbound queue is full
_WRITE = 2   # ...the write buffer is over its high-water mark


class WsConnection(asyncio.Protocol):
    """One upgraded socket. The listener makes it with the `ServerProtocol`, hands it the
    transport and the request bytes already read; `handshake` answers, then the socket's
    `Connection` reads messages with `async for` and writes through its outbound queue."""

    def __init__(self, protocol: ServerProtocol, server, *, ping_interval: float | None,
                 ping_timeout: float | None, close_timeout: float | None, max_queue: tuple[int, int],
                 inbound_bytes: int, write_timeout: float | None) -> None:
        self.protocol = protocol
        self.server = server
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.close_timeout = close_timeout
        self.queue_high, self.queue_low = max_queue
        self.high_bytes, self.low_bytes = inbound_bytes, inbound_bytes // 4
        self.write_timeout = write_timeout     # None: no watchdog (a close with its own deadline)
        self.on_writable = None                # called when the write buffer drains (Outbound)
        self.on_lost = None                    # called once the TCP connection is gone (Outbound)
        self.transport: asyncio.Transport | None = None
        self.watchdog: WriteWatchdog | None = None
        self.loop = asyncio.get_running_loop()
        self.request: Request | None = None
        self.response: Response | None = None
        self.request_rcvd = self.loop.create_future()
        self.lost = self.loop.create_future()
        self.paused = False                    # the write buffer is over its high-water mark
        self._read_pauses = 0                  # _QUEUE | _WRITE
        # whole messages waiting for the reader, and what they hold
        self._messages: collections.deque = collections.deque()
        self._queued_bytes = 0
        self._message_ready: asyncio.Future | None = None
        # the message being joined from its fragments
        self._parts: list = []
        self._size = 0
        self._text: bool = False
        self._decoder: codecs.IncrementalDecoder | None = None
        self._pings: dict[bytes, asyncio.Future] = {}
        self._keepalive: asyncio.Task | None = None
        self._close_timer: asyncio.TimerHandle | None = None

    # -- what the rest of the server reads ---------------------------------------------------
    @property
    def state(self):
        return self.protocol.state

    @property
    def subprotocol(self):
        return self.protocol.subprotocol

    @property
    def remote_address(self):
        return self.transport.get_extra_info("peername")

    @property
    def local_address(self):
        return self.transport.get_extra_info("sockname")

    @property
    def close_code(self):
        return self.protocol.close_code

    @property
    def close_reason(self):
        return self.protocol.close_reason

    def respond(self, status, text: str) -> Response:
        """A plain-text HTTP answer instead of the upgrade (the origin check's)."""
        return self.protocol.reject(status, text)

    # -- the opening handshake ---------------------------------------------------------------
    async def handshake(self, process_request=None, process_response=None, server_header: str | None = None) -> None:
        await asyncio.wait([self.request_rcvd, self.lost], return_when=asyncio.FIRST_COMPLETED)
        if self.request is None:
            return
        response = process_request(self, self.request) if process_request is not None else None
        self.response = self.protocol.accept(self.request) if response is None else response
        if server_header is not None:
            self.response.headers["Server"] = server_header
        if process_response is not None:
            replaced = process_response(self, self.request, self.response)
            if replaced is not None:
                self.response = replaced
        if self.response.status_code == http.HTTPStatus.SWITCHING_PROTOCOLS and not self.server.is_serving():
            self.response = self.protocol.reject(http.HTTPStatus.SERVICE_UNAVAILABLE, "Server is shutting down.\n")
        if self.protocol.state is CONNECTING:
            self.protocol.send_response(self.response)
            self._flush()
            if self.protocol.close_expected():   # a refusal: half-closed; wait for the peer to go
                self._arm_close_timer()
                await asyncio.shield(self.lost)

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(WRITE_HIGH, WRITE_LOW)
        self.watchdog = WriteWatchdog(transport, self.write_timeout, self._stalled, watch_closing=False)
        task = self.loop.create_task(self.server.handler(self))
        self.server.handler_tasks.add(task)

    def data_received(self, data: bytes) -> None:
        self.protocol.receive_data(data)
        events = self.protocol.events_received()
        self._flush()   # pongs, a close answered, a protocol error's close frame
        if self.protocol.close_expected():
            self._arm_close_timer()
        for event in events:
            if isinstance(event, Request):
                self.request = event
                if not self.request_rcvd.done():
                    self.request_rcvd.set_result(None)
            elif isinstance(event, Frame):
                self._frame(event)

    def eof_received(self) -> None:
        self.protocol.receive_eof()
        self.protocol.events_received()
        self._flush()

    def connection_lost(self, exc) -> None:
        self.protocol.receive_eof()   # idempotent: the state is CLOSED from here on
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        for waiter in self._pings.values():
            if not waiter.done():
                waiter.cancel()
        self._pings.clear()
        self._wake_reader()
        if not self.lost.done():
            self.lost.set_result(None)
        on_lost, self.on_lost, self.on_writable = self.on_lost, None, None
        if on_lost is not None:
            on_lost()

    def pause_writing(self) -> None:
        self.paused = True
        self._pause_reading(_WRITE)
        self.watchdog.arm()

    def resume_writing(self) -> None:
        self.paused = False
        self._resume_reading(_WRITE)
        if self.on_writable is not None:
            self.on_writable()

    # -- reading -----------------------------------------------------------------------------
    def _frame(self, frame: Frame) -> None:
        opcode = frame.opcode
        if opcode is Opcode.PONG:
            self._pong(bytes(frame.data))
            return
        if opcode not in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            return   # ping (answered by the protocol) and close (its handshake, the protocol's)
        if self.protocol.state is not OPEN:
            return
        if opcode is not Opcode.CONT:
            self._text = opcode is Opcode.TEXT
            self._parts = []
            self._size = 0
            self._decoder = codecs.getincrementaldecoder("utf-8")(errors="strict") if self._text else None
        data = bytes(frame.data)
        # websockets' parser keeps its last Frame (a local of its generator) until the next
        # frame's header has arrived: emptied here, or a socket would hold its last upload chunk
        # beside the next one it receives (docs/operations.md, "Files").
        frame.data = b""
        if self._decoder is not None:
            try:   # checked as it arrives, so a bad sequence closes before the rest comes
                self._parts.append(self._decoder.decode(data, final=frame.fin))
            except UnicodeDecodeError as exc:
                self._fail(CloseCode.INVALID_DATA, f"{exc.reason} at position {exc.start}")
                return
        else:
            self._parts.append(data)
        self._size += len(data)
        if not frame.fin:
            return
        message = "".join(self._parts) if self._text else b"".join(self._parts)
        size, self._parts, self._size = self._size + FRAME_OVERHEAD, [], 0
        self._messages.append((message, size))
        self._queued_bytes += size
        if len(self._messages) > self.queue_high or self._queued_bytes > self.high_bytes:
            self._pause_reading(_QUEUE)
        self._wake_reader()

    def _wake_reader(self) -> None:
        if self._message_ready is not None and not self._message_ready.done():
            self._message_ready.set_result(None)

    def __aiter__(self):
        return self._messages_in()

    async def _messages_in(self):
        """Whole messages until the connection closes (then the iteration ends: the reader's
        cleanup does not care whether the close was clean)."""
        while True:
            if self._messages:
                message, size = self._messages.popleft()
                self._queued_bytes -= size
                if len(self._messages) <= self.queue_low and self._queued_bytes <= self.low_bytes:
                    self._resume_reading(_QUEUE)
                yield message
                # Not kept while the next one is awaited: an upload chunk is megabytes, and the
                # socket would hold it beside the next chunk it is receiving.
                message = None
                continue
            if self.protocol.state is not OPEN or self.lost.done():
                return
            self._message_ready = self.loop.create_future()
            await asyncio.wait([self._message_ready, self.lost], return_when=asyncio.FIRST_COMPLETED)

    def _pause_reading(self, reason: int) -> None:
        if not self._read_pauses and not self.transport.is_closing():
            self.transport.pause_reading()
        self._read_pauses |= reason

    def _resume_reading(self, reason: int) -> None:
        if not self._read_pauses & reason:
            return
        self._read_pauses &= ~reason
        if not self._read_pauses and not self.transport.is_closing():
            self.transport.resume_reading()

    # -- writing: the one writer -------------------------------------------------------------
    def writing_paused(self) -> bool:
        """Is the write buffer over its high-water mark (wait for `on_writable`)?"""
        return self.paused

    def write_frames(self, frames: list[bytes]) -> bool:
        """Write complete, already-built frames in one call. Nothing is written once the
        closing handshake has begun (the protocol then owns what is sent): returns False."""
        if self.protocol.state is not OPEN or self.transport is None or self.transport.is_closing():
            return False
        self._write(frames)
        return True

    def _flush(self) -> None:
        """What the protocol has to send, in one write; an empty chunk half-closes."""
        pending: list[bytes] = []
        for data in self.protocol.data_to_send():
            if data:
                pending.append(data)
                continue
            if pending:
                self._write(pending)
                pending = []
            if self.transport.is_closing():
                continue
            if self.transport.can_write_eof():
                try:
                    self.transport.write_eof()
                except Exception:  # noqa: BLE001 - as in websockets: plausible OSError
                    pass
            else:
                self.transport.close()
        if pending:
            self._write(pending)

    def _write(self, chunks: list[bytes]) -> None:
        transport = self.transport
        if transport.is_closing():
            return
        self.watchdog.count(sum(map(len, chunks)))   # before the write: it may call pause_writing
        if len(chunks) == 1:
            transport.write(chunks[0])
        else:
            transport.writelines(chunks)
        self.watchdog.wrote()

    def _stalled(self, waiting: int) -> None:
        log.info("dropping a peer whose writes made no progress for %g s (%d bytes waiting)",
                 self.write_timeout, waiting)
        self.transport.abort()

    def without_write_timeout(self) -> None:
        """For a close that keeps its own deadline (the slow-consumer close waits 30 s or more
        for the client to read up to the close frame)."""
        self.write_timeout = None
        self.watchdog.disable()

    # -- closing -------------------------------------------------------------------------------
    def _arm_close_timer(self) -> None:
        if self._close_timer is None and self.close_timeout is not None and not self.lost.done():
            self._close_timer = self.loop.call_later(self.close_timeout, self._close_timed_out)

    def _close_timed_out(self) -> None:
        self._close_timer = None
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, code: int, reason: str) -> None:
        if self.protocol.state is OPEN:
            self.protocol.fail(code, reason)
            self._flush()
            self._arm_close_timer()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """The closing handshake: our close frame, then wait (up to `close_timeout`, counted
        from now) for the peer's and for the TCP connection to end."""
        if self.protocol.state is OPEN:
            try:
                self.protocol.send_close(code, reason)
            except InvalidState:
                pass
            self._flush()
            if self._close_timer is not None:   # this close's own deadline replaces an earlier one
                self._close_timer.cancel()
                self._close_timer = None
            self._arm_close_timer()
        await asyncio.shield(self.lost)

    async def wait_closed(self) -> None:
        await asyncio.shield(self.lost)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- keepalive -----------------------------------------------------------------------------
    def start_keepalive(self) -> None:
        if self.ping_interval is not None:
            self._keepalive = self.loop.create_task(self._keepalive_loop())

    async def _keepalive_loop(self) -> None:
        latency = 0.0
        while self.protocol.state is OPEN:
            await asyncio.sleep(max(0.0, self.ping_interval - latency))
            if self.protocol.state is not OPEN:
                return
            data = os.urandom(4)
            waiter = self.loop.create_future()
            self._pings[data] = waiter
            sent = self.loop.time()
            self.protocol.send_ping(data)
            self._flush()
            if self.ping_timeout is None:
                continue
            try:
                async with asyncio.timeout(self.ping_timeout):
                    await waiter
                latency = self.loop.time() - sent
            except TimeoutError:
                self._fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
                return

    def _pong(self, data: bytes) -> None:
        if data not in self._pings:
            return   # unsolicited
        for key in list(self._pings):   # a pong for the latest ping answers the earlier ones too
            waiter = self._pings.pop(key)
            if not waiter.done():
                waiter.set_result(None)
            if key == data:
                break


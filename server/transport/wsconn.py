"""The server's WebSocket connection: websockets' own, plus what it lacks for a server that must
bound what an unread connection costs. Every use of websockets' internals lives here, and
tests/server/transport/test_wsconn_fence.py fails when the websockets code this module relies on changes.

- Prebuilt frames: `protocol/wire/ws_frame.py` puts the RFC 6455 header on a framing's message, so an event's
  frame is built once and shared by every socket (server frames are unmasked), and a socket's
  frames of one loop turn leave in one write. websockets' protocol keeps no state about data
  frames it did not build, so they go straight to the transport (`write_frames`), never
  through `send()`.
- `send_data` is websockets' own, but consecutive chunks leave in one write, and every byte is
  counted: the write-progress watchdog compares what was written with what the kernel took.
- Inbound bytes are bounded: websockets bounds its queue in frames (`max_queue`), each up to
  `max_size`; here the queue is also bounded in bytes, and reading also stops while the write
  buffer is over its high-water mark (so a ping flood whose pongs are never read cannot grow
  it).
- A peer whose writes make no progress for `write_timeout` seconds is dropped (the transport is
  aborted), whatever is waiting: our frames, a pong, a keepalive ping, a close frame (the
  watchdog of server/transport/watchdog.py, the one HTTP connections use too).
"""
from __future__ import annotations

import logging

from websockets.asyncio.messages import Assembler, SimpleQueue
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame
from websockets.protocol import OPEN

from .watchdog import WriteWatchdog

log = logging.getLogger("seed_agents.wsconn")

__all__ = ["BatchingServerConnection", "FRAME_OVERHEAD", "WRITE_HIGH", "WRITE_LOW"]

# What one queued inbound frame costs besides its payload (the Frame object, its bytes header).
FRAME_OVERHEAD = 200
# The transport's write buffer: above WRITE_HIGH the connection stops reading and writers wait;
# below WRITE_LOW they resume.
WRITE_HIGH = 64 * 1024
WRITE_LOW = 16 * 1024

_QUEUE = 1   # reasons reading is paused: the inbound queue is full
_WRITE = 2   # ...the write buffer is over its high-water mark


class _ByteCountingQueue(SimpleQueue):
    """websockets' frame queue, counting the bytes it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def put(self, item: Frame) -> None:
        self.bytes += len(item.data) + FRAME_OVERHEAD
        super().put(item)

    async def get(self, block: bool = True) -> Frame:
        item = await super().get(block)
        self.bytes -= len(item.data) + FRAME_OVERHEAD
        return item

    def put_back(self, items) -> None:
        self.bytes += sum(len(item.data) + FRAME_OVERHEAD for item in items)
        super().put_back(items)


class _ByteBoundedAssembler(Assembler):
    """websockets' Assembler, paused by bytes as well as by frames: reading stops once the
    queued frames hold more than `high_bytes`, and resumes at `high_bytes // 4`."""

    def __init__(self, high: int, low: int, high_bytes: int, pause, resume) -> None:
        super().__init__(high, low, pause=pause, resume=resume)
        self.frames = _ByteCountingQueue()
        self.high_bytes, self.low_bytes = high_bytes, high_bytes // 4

    def maybe_pause(self) -> None:
        if not self.paused and (len(self.frames) > self.high or self.frames.bytes > self.high_bytes):
            self.paused = True
            self.pause()

    def maybe_resume(self) -> None:
        if self.paused and len(self.frames) <= self.low and self.frames.bytes <= self.low_bytes:
            self.paused = False
            self.resume()


class BatchingServerConnection(ServerConnection):
    def __init__(self, protocol, server, *, inbound_bytes: int, write_timeout: float | None,
                 **kw) -> None:
        super().__init__(protocol, server, write_limit=(WRITE_HIGH, WRITE_LOW), **kw)
        self.inbound_bytes = inbound_bytes
        self.write_timeout = write_timeout     # None: no watchdog (a close with its own deadline)
        self.on_writable = None                # called when the write buffer drains (Outbound)
        self.on_lost = None                    # called once the TCP connection is gone (Outbound)
        self.watchdog: WriteWatchdog | None = None   # made with the transport
        self._read_pauses = 0                  # _QUEUE | _WRITE

    # -- reading: paused by the inbound queue (frames or bytes) or by the write backlog --------
    def connection_made(self, transport) -> None:
        self.watchdog = WriteWatchdog(transport, self.write_timeout, self._stalled, watch_closing=False)
        super().connection_made(transport)   # websockets' (and it starts the handler task)
        self.recv_messages = _ByteBoundedAssembler(
            self.max_queue_high, self.max_queue_low or self.max_queue_high // 4, self.inbound_bytes,
            pause=lambda: self._pause_reading(_QUEUE), resume=lambda: self._resume_reading(_QUEUE))

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

    def pause_writing(self) -> None:
        super().pause_writing()
        self._pause_reading(_WRITE)
        self.watchdog.arm()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._resume_reading(_WRITE)
        if self.on_writable is not None:
            self.on_writable()

    # -- writing -----------------------------------------------------------------------------
    def writing_paused(self) -> bool:
        """Is the write buffer over its high-water mark (wait for `on_writable`)?"""
        return self.paused

    def write_frames(self, frames: list[bytes]) -> bool:
        """Write complete, already-built frames in one call. Nothing is written once the
        closing handshake has begun (websockets then owns the socket): returns False."""
        if self.protocol.state is not OPEN or self.transport.is_closing():
            return False
        self._write(frames)
        return True

    def send_data(self) -> None:
        # websockets' own, but consecutive chunks go out in one transport write, counted.
        pending: list[bytes] = []
        for data in self.protocol.data_to_send():
            if data:
                pending.append(data)
                continue
            if pending:
                self._write(pending)
                pending = []
            # An empty chunk asks to half-close the TCP connection (the library's rule).
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

    def connection_lost(self, exc) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
        on_lost, self.on_lost, self.on_writable = self.on_lost, None, None
        super().connection_lost(exc)
        if on_lost is not None:
            on_lost()

"""One socket's outbound queue: the only place that writes to the socket.

Everything a socket sends is a complete, prebuilt WebSocket frame (an event's is built once and
shared by every socket: protocol/wire/ws_frame.py), queued without blocking whoever produced it.
The queue holds frames and at most one `Close(code, reason)`. It is written once per loop
turn, in one call (all the frames a turn produced for the socket, up to a batch), and again
whenever the transport's buffer drains (server/transport/wsconn.py calls back).

Bounds (CONTRACT section 6): a socket whose queue passes `max_bytes` (a client that stopped
reading) is cut off with close 1013 and a reason naming the last seq it was sent. The frames
still queued are dropped, and the close frame follows what was already written. Answers are
bounded the same way; the reader stops reading a socket whose queue is past `low_water`.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass

from websockets.exceptions import ConnectionClosed

from .wsconn import WRITE_HIGH

log = logging.getLogger("seed_agents.outbound")

_BATCH_FRAMES = 256          # frames written together at most
_BATCH_BYTES = 256 * 1024    # bytes written together at most (about)
# Bytes a burst of one loop turn may queue beyond the bound while the transport can take them
# (what it held at most before the bound applied, when frames went straight to it).
_DIRECT_ROOM = 64 * 1024


@dataclass(frozen=True, slots=True)
class Close:
    """Queue item: close with (code, reason) once the frames before it are written."""
    code: int
    reason: str


class Outbound:
    def __init__(self, ws, *, max_bytes: int, slow_close_timeout: float, on_cut_off=None) -> None:
        self.ws = ws
        self.max_bytes = max_bytes
        self.low_water = max(64 * 1024, max_bytes // 8)
        self.slow_close_timeout = slow_close_timeout
        self.on_cut_off = on_cut_off
        self._queue: collections.deque[bytes | Close] = collections.deque()
        self._bytes = 0            # bytes queued, not yet handed to the socket
        self._queued_total = 0     # bytes ever queued: the stream position of the queue's end
        self._written_total = 0    # bytes ever handed to the socket
        # (stream position of a durable event's frame end, key, seq): last_sent moves only once
        # the frame is written, so a cut-off's reason never names a seq that was dropped.
        self._marks: collections.deque[tuple[int, str, int]] = collections.deque()
        self.last_sent: dict[str, int] = {}   # key -> last durable seq handed to the socket
        self._room = asyncio.Event()
        self._room.set()
        self._scheduled = False
        self._closing: asyncio.Task | None = None   # the close of a Close item, or the cut-off's
        self._close_done = asyncio.Event()          # the Close item's close has finished
        self.closed = False        # nothing more is accepted
        self.close_queued = False  # close_after_queued was called: close() lets that finish
        ws.on_writable = self._schedule
        ws.on_lost = self._lost

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    def held_bytes(self) -> int:
        """Everything this socket holds in the server and has not written: the queue and the
        transport's buffer (the metric seed_agents_outbound_bytes)."""
        transport = getattr(self.ws, "transport", None)
        buffered = transport.get_write_buffer_size() if transport is not None and not transport.is_closing() else 0
        return self._bytes + buffered

    def put(self, frame: bytes, key: str | None = None, seq: int = 0, *, bounded: bool = True) -> bool:
        """Queue an event's frame; written at the end of this loop turn. A frame that would
        take the queue past the bound cuts the socket off (`bounded=False`: a replay page,
        paced by `wait_room`)."""
        if self.closed:
            return False
        size = len(frame)
        if bounded and self._bytes + size > self.max_bytes and \
                self._bytes + size > self.max_bytes + self._transport_room():
            self.cut_off(key)
            return False
        self._append(frame, size, key, seq)
        return True

    def put_answer(self, frame: bytes, *, bounded: bool = True) -> bool:
        """Queue an answer (or notice). One answer may be larger than the bound (a page of
        GetSession), so it is refused only behind a backlog already past the bound: a client
        that sends requests without reading the answers is cut off there."""
        if self.closed:
            return False
        if bounded and self._bytes > self.max_bytes:
            self.cut_off(None)
            return False
        self._append(frame, len(frame), None, 0)
        return True

    def _append(self, frame: bytes, size: int, key: str | None, seq: int) -> None:
        self._queue.append(frame)
        self._bytes += size
        self._queued_total += size
        if seq:
            self._marks.append((self._queued_total, key, seq))
        if self._bytes > self.low_water:
            self._room.clear()
        self._schedule()

    def _transport_room(self) -> int:
        transport = self.ws.transport
        return max(0, _DIRECT_ROOM - transport.get_write_buffer_size()) if transport is not None else 0

    def close_after_queued(self, code: int, reason: str) -> None:
        """Close with (code, reason) right after the frames queued so far (an answer, then the
        close of a policy limit); nothing queued later is sent."""
        if self.closed:
            return
        self._queue.append(Close(code, reason))
        self.closed = True
        self.close_queued = True
        self._schedule()

    async def wait_room(self) -> None:
        """Flow control for producers that can wait (replay pages, the reader loop)."""
        while self._bytes > self.low_water and not self.closed:
            self._room.clear()
            await self._room.wait()

    async def wait_fits(self, size: int) -> None:
        """Flow control for replay: wait until `size` more bytes fit under the bound, or nothing
        is queued (a frame larger than the bound still goes out, alone)."""
        while self._bytes and self._bytes + size > self.max_bytes and not self.closed:
            self._room.clear()   # set again by the writer once the queue is at low water
            await self._room.wait()

    def fits(self, size: int) -> bool:
        return not self._bytes or self._bytes + size <= self.max_bytes

    # -- writing -----------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled and self._queue:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write what is queued, in batches, while the transport takes it; the rest waits for
        the transport to drain (`ws.on_writable`)."""
        self._scheduled = False
        ws, queue = self.ws, self._queue
        while queue and not ws.writing_paused():
            if type(queue[0]) is Close:
                item = queue.popleft()
                self._closing = asyncio.ensure_future(self._close(item))
                break
            batch: list[bytes] = []
            sent = 0
            # No more than the transport's room under its high-water mark (one frame at least):
            # what a socket holds is then its queue plus at most one frame past that mark.
            limit = min(_BATCH_BYTES, max(1, WRITE_HIGH - ws.transport.get_write_buffer_size()))
            while queue and len(batch) < _BATCH_FRAMES and type(queue[0]) is not Close and \
                    (not batch or sent + len(queue[0]) <= limit):
                frame = queue.popleft()
                batch.append(frame)
                sent += len(frame)
            self._bytes -= sent
            if not ws.write_frames(batch):   # the closing handshake began: nothing more goes
                self._drop_queued()
                self.closed = True
                break
            self._written_total += sent
            marks = self._marks
            while marks and marks[0][0] <= self._written_total:
                _, key, seq = marks.popleft()
                self.last_sent[key] = seq
        if self._bytes <= self.low_water or self.closed:
            self._room.set()

    def _lost(self) -> None:
        """The TCP connection is gone: nothing more goes out, and whoever waits for room (the
        reader, a replay) stops waiting."""
        self.closed = True
        self._drop_queued()
        self._room.set()

    def _drop_queued(self) -> None:
        self._queue.clear()
        self._marks.clear()
        self._bytes = 0

    async def _close(self, item: Close) -> None:
        try:
            await self.ws.close(item.code, item.reason)
        except (ConnectionClosed, OSError):
            pass
        finally:
            self._close_done.set()

    # -- the slow consumer -------------------------------------------------------------------
    def cut_off(self, key: str | None) -> None:
        if self.closed:
            return
        self.closed = True
        self._drop_queued()   # never handed to the socket: last_sent does not count them
        self._room.set()
        reason = self.slow_reason(key)
        log.info("slow consumer cut off: %s", reason)
        if self.on_cut_off is not None:
            self.on_cut_off()
        self._closing = asyncio.ensure_future(self._close_slow(reason))

    def slow_reason(self, key: str | None) -> str:
        # A close reason is at most 123 bytes: name the stream that overflowed first.
        names = [key] if key and key in self.last_sent else []
        names += [k for k in self.last_sent if k not in names]
        reason = "slow consumer"
        for k in names:
            part = f"; {k} last seq {self.last_sent[k]}"
            if len((reason + part).encode()) > 123:
                break
            reason += part
        return reason

    async def _close_slow(self, reason: str) -> None:
        # websockets gives up on the closing handshake after its own close_timeout (5 s on the
        # server), and the write watchdog after --write-timeout: the contract wants at least
        # 30 s here, so this close uses ours (a client that reads again still finds the reason).
        self.ws.close_timeout = self.slow_close_timeout
        self.ws.without_write_timeout()
        try:
            await asyncio.wait_for(self.ws.close(1013, reason), self.slow_close_timeout)
        except (asyncio.TimeoutError, ConnectionClosed, OSError):
            pass
        finally:
            transport = self.ws.transport
            if transport is not None and not transport.is_closing():
                transport.abort()

    async def close(self) -> None:
        """The connection ends: an answer and the close queued after it still go out (within
        the slow-close timeout); anything else queued is dropped."""
        self.closed = True
        if self.close_queued and not self._close_done.is_set():
            done = asyncio.ensure_future(self._close_done.wait())
            lost = asyncio.ensure_future(self.ws.wait_closed())
            await asyncio.wait([done, lost], timeout=self.slow_close_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
            lost.cancel()
        self._drop_queued()
        self._room.set()

"""One socket's outbound queue: the only place that writes to the socket.

Events are queued without blocking the publisher. A socket whose queue passes its byte bound
(a client that stopped reading) is cut off with close 1013 and a reason naming the last seq it
was sent; the events still queued are dropped, and the close frame follows what was written.
"""
from __future__ import annotations

import asyncio
import collections
import logging

from websockets.exceptions import ConnectionClosed

log = logging.getLogger("seed_agents.outbound")

_BATCH_FRAMES = 256          # frames written together at most
_BATCH_BYTES = 256 * 1024    # bytes written together at most (about)

_DIRECT_LIMIT = 64 * 1024    # write directly while the transport holds less than this
_CLOSE = object()   # queue marker: close the socket once the frames before it are written


class Outbound:
    def __init__(self, ws, *, max_bytes: int, slow_close_timeout: float, on_cut_off=None) -> None:
        self.ws = ws
        self.max_bytes = max_bytes
        self.low_water = max(64 * 1024, max_bytes // 8)
        self.slow_close_timeout = slow_close_timeout
        self.on_cut_off = on_cut_off
        self._queue: collections.deque = collections.deque()   # (frame, key, seq)
        self._bytes = 0
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.closed = False
        self.close_queued = False   # close_after_queued was called: close() lets that finish
        self.last_sent: dict[str, int] = {}   # key -> last durable seq handed to the socket
        self.task: asyncio.Task | None = None
        self._pending: list[bytes] = []   # complete frames for this loop iteration's write
        self._pending_bytes = 0
        self._writing = 0   # bytes of the batch being written (held_bytes counts them once)

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    def held_bytes(self) -> int:
        """Everything this socket holds in the server and has not written: the queue, this loop
        iteration's batch and the transport's buffer (the metric seed_agents_outbound_bytes)."""
        transport = getattr(self.ws, "transport", None)
        buffered = transport.get_write_buffer_size() if transport is not None and not transport.is_closing() else 0
        return self._bytes + self._pending_bytes + max(0, buffered - self._writing)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="outbound")

    def put(self, frame: bytes, key: str | None = None, seq: int = 0, *, bounded: bool = True) -> bool:
        """Queue a complete WebSocket frame (an event's is shared by every subscriber).
        Responses are unbounded here (the reader stops reading instead); events past the bound
        cut the socket off."""
        if self.closed:
            return False
        if not self._queue and self._can_write_now():
            # Fast path: nothing waits before this frame and the socket keeps up. The frame
            # joins this loop iteration's batch for the socket, written in one call at its end:
            # no task switch, no drain, one system call per socket for a burst of events.
            wire = frame
            if not self._pending:
                asyncio.get_running_loop().call_soon(self.flush_pending)
            self._pending.append(wire)
            self._pending_bytes += len(wire)
            if seq:
                self.last_sent[key] = seq
            return True
        size = len(frame)
        if bounded and self._bytes + size > self.max_bytes:
            self.cut_off(key)
            return False
        self._queue.append((frame, key, seq))
        self._bytes += size
        if self._bytes > self.low_water:
            self._room.clear()
        self._wake.set()
        return True

    def _can_write_now(self) -> bool:
        transport = getattr(self.ws, "transport", None)
        if transport is None or not hasattr(self.ws, "write_frames"):
            return False
        return transport.get_write_buffer_size() + self._pending_bytes <= _DIRECT_LIMIT

    def flush_pending(self) -> None:
        """Write this iteration's batch (the loop calls it; so do paths that must keep order)."""
        if self._pending:
            frames, self._pending, self._pending_bytes = self._pending, [], 0
            self.ws.write_frames(frames)

    def close_after_queued(self, code: int, reason: str) -> None:
        """Close with (code, reason) right after the frames queued so far (an answer, then the
        close of a policy limit); nothing queued later is sent."""
        if self.closed:
            return
        self._queue.append((_CLOSE, code, reason))
        self.closed = True
        self.close_queued = True
        self._wake.set()

    async def wait_room(self) -> None:
        """Flow control for producers that can wait (replay pages, the reader loop)."""
        while self._bytes > self.low_water and not self.closed:
            self._room.clear()
            await self._room.wait()

    async def wait_fits(self, size: int) -> None:
        """Flow control for replay: wait until `size` more bytes fit under the bound, or nothing
        is queued (a frame larger than the bound still goes out, alone)."""
        while self._bytes and self._bytes + size > self.max_bytes and not self.closed:
            self._room.clear()   # set again by the writer after its next batch, at low water
            await self._room.wait()

    def fits(self, size: int) -> bool:
        return not self._bytes or self._bytes + size <= self.max_bytes

    async def _run(self) -> None:
        ws, queue = self.ws, self._queue
        try:
            while True:
                while not queue:
                    if self.closed:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                self.flush_pending()   # frames batched before these go first
                data, key, seq = queue.popleft()
                if data is _CLOSE:
                    await ws.close(key, seq)
                    return
                # Everything queued (up to a bound, and up to a close marker) goes out in one
                # write. send_frames writes before its first await (it then waits for the buffer
                # to drain), so from here on these frames precede any close frame.
                batch, sent = [data], len(data)
                if seq:
                    self.last_sent[key] = seq
                while queue and len(batch) < _BATCH_FRAMES and sent < _BATCH_BYTES \
                        and queue[0][0] is not _CLOSE:
                    data, key, seq = queue.popleft()
                    batch.append(data)
                    sent += len(data)
                    if seq:
                        self.last_sent[key] = seq
                self._writing = sent   # counted in _bytes and, once written, in the transport's buffer
                await ws.send_frames(batch)
                self._writing = 0
                self._bytes -= sent
                if self._bytes <= self.low_water:
                    self._room.set()
        except ConnectionClosed:
            pass
        finally:
            self.closed = True
            self._room.set()

    def cut_off(self, key: str | None) -> None:
        if self.closed:
            return
        self.flush_pending()   # already counted as sent (last_sent): they precede the close
        self.closed = True
        self._queue.clear()
        self._bytes = 0
        self._room.set()
        self._wake.set()
        reason = self.slow_reason(key)
        log.info("slow consumer cut off: %s", reason)
        if self.on_cut_off is not None:
            self.on_cut_off()
        asyncio.create_task(self._close_slow(reason))

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
        if self.task is not None:
            self.task.cancel()  # whatever frame it was waiting to write is dropped
        # websockets gives up on the closing handshake after its own close_timeout (5 s on the
        # server): the contract wants at least 30 s here, so this close uses ours.
        self.ws.close_timeout = self.slow_close_timeout
        try:
            await asyncio.wait_for(self.ws.close(1013, reason), self.slow_close_timeout)
        except (asyncio.TimeoutError, ConnectionClosed, OSError):
            pass
        finally:
            transport = getattr(self.ws, "transport", None)
            if transport is not None and not transport.is_closing():
                transport.abort()

    async def close(self) -> None:
        self.closed = True
        self._wake.set()
        if self.task is not None:
            if self.close_queued and not self.task.done():
                # The answer and the close frame after it still go out (bounded wait).
                await asyncio.wait([self.task], timeout=self.slow_close_timeout)
            self.task.cancel()

"""The write-progress watchdog, one for both kinds of connection (HTTP, WebSocket): a peer
whose writes make no progress for `timeout` seconds is dropped, whatever waits (an answer, our
frames, a pong, a close frame). Progress is what the kernel took: bytes handed to the
transport, ever, less what its buffer still holds."""
from __future__ import annotations

import asyncio
from collections.abc import Callable


class WriteWatchdog:
    __slots__ = ("transport", "timeout", "on_stall", "watch_closing", "written", "_at_check", "_handle")

    def __init__(self, transport: asyncio.WriteTransport, timeout: float | None,
                 on_stall: Callable[[int], None], *, watch_closing: bool) -> None:
        self.transport = transport
        self.timeout = timeout if timeout and timeout > 0 else None   # None: no watchdog
        self.on_stall = on_stall          # called with the bytes waiting; it drops the peer
        self.watch_closing = watch_closing   # keep watching a closing transport (its close waits on the buffer)
        self.written = 0                  # bytes handed to the transport, ever
        self._at_check = 0                # what the kernel had taken at the last check
        self._handle: asyncio.TimerHandle | None = None

    def wrote(self) -> None:
        """After a write: armed when it did not all leave."""
        if self._handle is None and self.transport.get_write_buffer_size():
            self.arm()

    def count(self, n: int) -> None:
        """Before a write that may call pause_writing (which arms): count it first."""
        self.written += n

    def _accepted(self) -> int:
        return self.written - self.transport.get_write_buffer_size()

    def arm(self) -> None:
        if self._handle is not None or self.timeout is None:
            return
        if not self.watch_closing and self.transport.is_closing():
            return
        self._at_check = self._accepted()
        self._handle = asyncio.get_running_loop().call_later(self.timeout, self._check)

    def _check(self) -> None:
        self._handle = None
        transport = self.transport
        if self.timeout is None or not transport.get_write_buffer_size():
            return   # nothing waits: disarmed until the next write that does not all leave
        if not self.watch_closing and transport.is_closing():
            return
        if self._accepted() > self._at_check:
            self.arm()   # progress: watch the next interval
            return
        self.on_stall(transport.get_write_buffer_size())

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def disable(self) -> None:
        """For a close that keeps its own deadline."""
        self.timeout = None
        self.cancel()

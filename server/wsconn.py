"""The server's WebSocket connection class: websockets' own, plus writing several queued
frames with one system call.

A turn sends each subscriber a handful of small frames in a burst (partials, appends,
changes); writing them one `send()` at a time costs a write and a drain per frame per socket,
which dominated fan-out to hundreds of sockets.
"""
from __future__ import annotations

from websockets.asyncio.server import ServerConnection
from websockets.protocol import OPEN


class BatchingServerConnection(ServerConnection):
    async def send_frames(self, frames: list[bytes]) -> None:
        """Write complete frames in order, in one call, then wait for the buffer to drain
        (websockets' send_context: nothing is written unless the socket is open)."""
        async with self.send_context():
            self.transport.writelines(frames)

    def write_frames(self, frames: list[bytes]) -> None:
        """Write complete, already-built frames (see server.frames.ws_frame) in one call.

        Server frames are unmasked, so an event's frame is built once and shared by every
        subscriber; websockets' protocol keeps no state about data frames it did not build.
        Nothing is written once the closing handshake has begun."""
        if self.protocol.state is not OPEN:
            return
        if len(frames) == 1:
            self.transport.write(frames[0])
        else:
            self.transport.writelines(frames)

    def send_data(self) -> None:
        # As the library does, but consecutive chunks go out in one transport write.
        pending: list[bytes] = []
        for data in self.protocol.data_to_send():
            if data:
                pending.append(data)
                continue
            if pending:
                self.transport.writelines(pending)
                pending = []
            # An empty chunk asks to half-close the TCP connection (the library's rule).
            if self.transport.can_write_eof():
                try:
                    self.transport.write_eof()
                except Exception:  # noqa: BLE001 - as in websockets: plausible OSError
                    pass
            else:
                self.transport.close()
        if len(pending) == 1:
            self.transport.write(pending[0])
        elif pending:
            self.transport.writelines(pending)

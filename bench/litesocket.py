"""A minimal v2 WebSocket client for fan-out: one load process watching thousands of sockets."""
from __future__ import annotations

import asyncio
import socket
import time

from seed_agents.clients.raw import client_frame, parse_server_frame, tcp_handshake

SO_TIMESTAMPNS = 35   # Linux: the kernel stamps each received segment (CLOCK_REALTIME, ns)


def recv_stamped(sock, size: int) -> tuple[bytes, float, float | None] | None:
    """One non-blocking read of a socket with SO_TIMESTAMPNS on: (data, when this process read it
    on perf_counter's clock, the kernel's receive stamp on time.time's clock or None); None when
    nothing was ready; data b"" when the peer closed or the read failed."""
    try:
        data, anc, _flags, _addr = sock.recvmsg(size, socket.CMSG_SPACE(16))
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        data, anc = b"", []
    t_user = time.perf_counter()
    t_kernel = None
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
            t_kernel = int.from_bytes(payload[:8], "little") + int.from_bytes(payload[8:16], "little") / 1e9
    return data, t_user, t_kernel


class LiteSocket:
    """A minimal v2 WebSocket client for fan-out, where one load process must watch thousands
    of sockets: a raw non-blocking socket read with recvmsg from an event-loop reader callback,
    server frames (never masked) parsed in place, each binary message handed to
    `on_frame(payload, t_user, t_kernel)`; pings answered; binary frames sent masked.

    `t_kernel` is the kernel's receive timestamp of the data (SO_TIMESTAMPNS, on time.time()'s
    clock): on loopback the segment lands in the socket while the *server* sends it, so this is
    the server's delivery time whatever the load process is doing; `t_user` (perf_counter) is
    when this process got to read it. A websockets client costs ~30-50 us of Python per frame;
    this costs a few, plus the recv syscall."""

    def __init__(self, sock, on_frame) -> None:
        self.sock = sock
        self.on_frame = on_frame
        self.buf = b""
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.kernel_stamps = False

    @classmethod
    async def connect(cls, url: str, on_frame) -> "LiteSocket":
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        sock, rest = await tcp_handshake(parts.hostname, parts.port, path=parts.path)
        self = cls(sock, on_frame)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self.kernel_stamps = True
        except OSError:
            pass
        if rest:
            self._feed(rest, time.perf_counter(), time.time())
        loop.add_reader(sock.fileno(), self._readable)
        return self

    def _readable(self) -> None:
        got = recv_stamped(self.sock, 1 << 18)
        if got is None:
            return
        data, t_user, t_kernel = got
        if not data:
            self.close()
            return
        self._feed(data, t_user, t_kernel)

    def _feed(self, data: bytes, t_user: float, t_kernel: float | None) -> None:
        buf = self.buf + data if self.buf else data
        pos = 0
        while (frame := parse_server_frame(buf, pos)) is not None:
            opcode, payload, pos = frame
            if opcode == 2:
                self.on_frame(payload, t_user, t_kernel)
            elif opcode == 9:
                self._send(0xA, payload)
            elif opcode == 8:
                self.close()
                return
        self.buf = buf[pos:]

    def _send(self, opcode: int, payload: bytes) -> None:
        if not self.closed:
            self.sock.sendall(client_frame(payload, opcode))  # small frames only

    def send(self, payload: bytes) -> None:
        self._send(0x2, payload)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._send(0x8, (1000).to_bytes(2, "big"))
        except OSError:
            pass
        self.closed = True
        try:
            self.loop.remove_reader(self.sock.fileno())
        except (ValueError, OSError):
            pass
        self.sock.close()

"""A minimal v2 WebSocket client for fan-out: one load process watching thousands of sockets."""
from __future__ import annotations

import asyncio
import os
import time

from clients.raw import V2

_SO_TIMESTAMPNS = 35   # Linux: the kernel stamps each received segment (CLOCK_REALTIME, ns)


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
        import base64
        import socket as socket_mod
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        sock = socket_mod.socket(socket_mod.AF_INET, socket_mod.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket_mod.IPPROTO_TCP, socket_mod.TCP_NODELAY, 1)
        await loop.sock_connect(sock, (parts.hostname, parts.port))
        key = base64.b64encode(os.urandom(16)).decode()
        await loop.sock_sendall(sock, (
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
            f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {V2}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 4096), 30)
            if not chunk:
                raise ConnectionError("closed during the WebSocket handshake")
            head += chunk
        head, rest = head.split(b"\r\n\r\n", 1)
        text = head.decode("latin-1")
        if not text.startswith("HTTP/1.1 101") or V2 not in text:
            sock.close()
            raise ConnectionError(text.splitlines()[0])
        self = cls(sock, on_frame)
        try:
            sock.setsockopt(socket_mod.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            self.kernel_stamps = True
        except OSError:
            pass
        if rest:
            self._feed(rest, time.perf_counter(), time.time())
        loop.add_reader(sock.fileno(), self._readable)
        return self

    def _readable(self) -> None:
        import socket as socket_mod

        try:
            data, anc, _flags, _addr = self.sock.recvmsg(1 << 18, socket_mod.CMSG_SPACE(16))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        t_user = time.perf_counter()
        if not data:
            self.close()
            return
        t_kernel = None
        for level, kind, payload in anc:
            if level == socket_mod.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
                t_kernel = int.from_bytes(payload[:8], "little") + int.from_bytes(payload[8:16], "little") / 1e9
        self._feed(data, t_user, t_kernel)

    def _feed(self, data: bytes, t_user: float, t_kernel: float | None) -> None:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        while n - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            size, hdr = b1 & 0x7F, 2
            if size == 126:
                if n - pos < 4:
                    break
                size, hdr = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
            elif size == 127:
                if n - pos < 10:
                    break
                size, hdr = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
            if n - pos < hdr + size:
                break
            payload = buf[pos + hdr:pos + hdr + size]
            pos += hdr + size
            opcode = b0 & 0x0F
            if opcode == 2:
                self.on_frame(payload, t_user, t_kernel)
            elif opcode == 9:
                self._send(0xA, payload)
            elif opcode == 8:
                self.close()
                return
        self.buf = buf[pos:]

    def _send(self, opcode: int, payload: bytes) -> None:
        from websockets.utils import apply_mask

        n = len(payload)
        if n < 126:
            head = bytes((0x80 | opcode, 0x80 | n))
        elif n < 65536:
            head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        if not self.closed:
            self.sock.sendall(head + mask + apply_mask(payload, mask))  # small frames only

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

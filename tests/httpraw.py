"""A thin HTTP test client: POST exact envelope bytes the way the Seed desktop does, and read the
CBOR answer (real sockets, httpx keep-alive)."""
from __future__ import annotations

import asyncio
import socket

import httpx

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

CBOR_HEADERS = {"Content-Type": "application/cbor", "Accept": "application/cbor"}
CORS = {"access-control-allow-origin": "*",
        "access-control-allow-methods": "GET, POST, OPTIONS",
        "access-control-allow-headers": "Content-Type, Accept"}


def base_url(server) -> str:
    return f"http://{server.host}:{server.port}"


async def post(http: httpx.AsyncClient, base: str, body: bytes, path: str = "/api/message",
               headers: dict | None = None) -> tuple[int, dict]:
    r = await http.post(base + path, content=body, headers=headers or CBOR_HEADERS)
    assert_cors(r.headers)
    return r.status_code, dagcbor.decode(r.content, max_size=max(len(r.content), 1), max_items=None)


async def act(http: httpx.AsyncClient, base: str, kp, action: dict, **kw) -> tuple[int, dict]:
    return await post(http, base, sign_envelope(kp, action, **kw))


def assert_cors(headers) -> None:
    for name, value in CORS.items():
        assert headers.get(name) == value, (name, dict(headers))


class RawHttp:
    """One raw TCP connection, for what httpx will not send (huge declared lengths, trickles)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, server) -> "RawHttp":
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, timeout: float = 5.0) -> tuple[int, dict, bytes]:
        """One HTTP/1.1 response with a Content-Length (ours always have one, or are 204)."""
        async def read():
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                if line:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
            return status, headers, body
        return await asyncio.wait_for(read(), timeout)

    async def closed(self, timeout: float) -> bool:
        """True when the server closes the connection within `timeout` (EOF or reset)."""
        try:
            while True:
                data = await asyncio.wait_for(self.reader.read(65536), timeout)
                if not data:
                    return True
        except asyncio.TimeoutError:   # before OSError: TimeoutError is one of its subclasses
            return False
        except (ConnectionError, OSError):
            return True

    def close(self) -> None:
        self.writer.close()


def request(method: str, path: str, body: bytes = b"", headers: dict | None = None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    if body or method == "POST":
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body

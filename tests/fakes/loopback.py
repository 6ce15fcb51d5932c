"""What every fake HTTP server of the tests shares: a real HTTP/1.1 server on 127.0.0.1 (asyncio
streams only, keep-alive, Content-Length request bodies) and its life cycle.

    class FakeThing(LoopbackFake):
        async def _respond(self, request, reader, writer) -> bool:
            return await send_json(writer, 200, {"ok": True})   # False ends the connection

    async with FakeThing() as fake:          # listening on a free port: fake.base_url
        ...

`LoopbackFake` listens, runs one task per connection that reads requests in order and hands
each to `_respond`, counts connections, and on close ends the connections still open (on 3.11
closing an asyncio server leaves accepted connections open). A fake run as its own process
prints its address and waits in `serve_until_signal`.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from tests.waiting import until

# How often a paused response looks for the client having gone away.
POLL_SECONDS = 0.005


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or None when the body was empty or not JSON
    raw_body: bytes = b""


class LoopbackFake:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.connections = 0  # accepted so far; shows whether clients reuse connections
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    async def _respond(self, request: RecordedRequest, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must end."""
        raise NotImplementedError

    async def start(self):  # noqa: ANN201
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self):  # noqa: ANN204
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        self.connections += 1
        try:
            while True:
                request = await read_request(reader)
                if request is None or not await self._respond(request, reader, writer):
                    break
        except (ConnectionError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away or sent something we do not speak; drop it
        except asyncio.CancelledError:
            pass  # close() ends open connections
        finally:
            self._handlers.discard(task)
            writer.close()


async def serve_until_signal(line: str) -> None:
    """For a fake run as a process: print `line` (its address, for the parent to read), then
    wait for SIGINT or SIGTERM."""
    print(line, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


# -- HTTP ------------------------------------------------------------------------------------


async def read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        first = await reader.readexactly(1)
        if not first.isalpha():
            return None  # not HTTP (e.g. a TLS handshake): hang up, as a real server would
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed an idle keep-alive connection
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    raw = await reader.readexactly(length) if length else b""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return RecordedRequest(method, target, headers, body, raw)


def response_head(status: int, content_type: str, *, chunked: bool = False, length: int = 0) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Cache-Control: no-cache\r\n{framing}\r\n\r\n"
    ).encode("latin-1")


async def send(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes) -> bool:
    writer.write(response_head(status, content_type, length=len(body)) + body)
    await writer.drain()
    return True


async def send_json(writer: asyncio.StreamWriter, status: int, value: Any) -> bool:
    return await send(writer, status, "application/json", json.dumps(value).encode())


def chunk_frame(data: bytes) -> bytes:
    """One piece of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


async def pause(reader: asyncio.StreamReader, seconds: float | None) -> bool:
    """Wait `seconds` (None: forever); True as soon as the client closes the connection."""
    # EOF is fed to the reader by the protocol whether or not anyone reads, so polling
    # at_eof() notices a closed connection without consuming request bytes.
    try:
        return await until(reader.at_eof, math.inf if seconds is None else seconds, step=POLL_SECONDS)
    except TimeoutError:
        return False

"""The sandbox's only way out (`--exec-network`): an HTTP proxy the server runs for one sandbox
run, on a Unix socket bound into the sandbox, that connects only where a network policy allows.

The sandbox keeps a network namespace of its own with nothing but its loopback, so its code has no
route anywhere. Inside, the helper (inside.py) listens on 127.0.0.1:PROXY_PORT of that namespace
and relays each connection to this socket, and the code's environment names it
(`HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`, the lower-case ones too), which curl, Python's urllib and
requests, pip, git and most tools follow. Here each connection asks for one destination, either
`CONNECT host:port` (a tunnel: TLS end to end, the proxy sees only the name) or a plain
`GET http://host/...` (sent on with `Connection: close`). The server resolves the name itself,
keeps the addresses the policy allows (the web tools' `--web-networks`, public only by default),
and connects to one of those, as every outbound connection of the server does
(server/providers/outbound_guard.py); a refused destination is answered 403 with the reason.
A run's proxy carries at most `max_bytes` both ways together and `max_connections` at once, and
closes with the run, so no connection outlives it.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from ..providers.network import NetworkPolicy, address_class, refusal_text
from ..providers.outbound_guard import resolve

SOCKET_DIR = "/run/egress"      # where the socket's folder is bound inside the sandbox
SOCKET_NAME = "proxy.sock"
PROXY_PORT = 3128               # the relay's port on the sandbox's own loopback
HEAD_MAX = 16 * 1024            # bytes of a request's head (request line and headers)
HEAD_TIMEOUT = 10.0             # seconds to send that head
CONNECT_TIMEOUT = 10.0          # seconds to reach the destination
MAX_CONNECTIONS = 16            # at once, per run
MAX_BYTES = 64 << 20            # per run, both directions together
_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive", "te", "trailer", "upgrade"}


class _Budget:
    def __init__(self, max_bytes: int) -> None:
        self.left = max_bytes

    def take(self, n: int) -> bool:
        self.left -= n
        return self.left >= 0


class Egress:
    """One run's proxy. `async with Egress(policy).serving() as folder:` binds `folder` (holding
    the socket) into the sandbox at SOCKET_DIR; leaving the block closes every connection."""

    def __init__(self, policy: NetworkPolicy, max_bytes: int = MAX_BYTES,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.policy = policy
        self.budget = _Budget(max_bytes)
        self.slots = asyncio.Semaphore(max_connections)
        self.tasks: set[asyncio.Task] = set()
        self.refused: list[str] = []     # destinations refused, for the run's log line

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        folder = tempfile.mkdtemp(prefix="seed-egress-")
        path = os.path.join(folder, SOCKET_NAME)
        server = await asyncio.start_unix_server(self._accept, path, limit=HEAD_MAX)
        # The sandbox runs as another user (65534 under a root server): it may reach the socket,
        # and nothing else of the folder.
        os.chmod(folder, 0o711)
        os.chmod(path, 0o666)
        try:
            yield folder
        finally:
            server.close()
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            with contextlib.suppress(OSError):
                os.unlink(path)
            with contextlib.suppress(OSError):
                os.rmdir(folder)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            if self.slots.locked():
                await _answer(writer, 503, f"this sandbox has {MAX_CONNECTIONS} connections open, the most it may")
                return
            async with self.slots:
                await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass
        finally:
            self.tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await _answer(writer, 400, "not an HTTP proxy request")
            return
        method, target, version = parts
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            rest = b""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                await _answer(writer, 400, "a proxy request names an http:// URL (https goes through CONNECT)")
                return
            host, port_text = url.hostname, str(url.port or 80)
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            headers = [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in _HOP]
            rest = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""]).encode("latin-1")
        host = host.strip("[]")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            await _answer(writer, 400, "the proxy request names no host and port")
            return
        port = int(port_text)
        try:
            addresses = await resolve(host, port)
        except OSError:
            await _answer(writer, 502, f"{host} could not be resolved")
            return
        allowed = [ip for ip in addresses if self.policy.allows(ip)]
        if not allowed:
            reason = refusal_text(host, (address_class(ip) for ip in addresses), self.policy.flag)
            self.refused.append(host)
            await _answer(writer, 403, reason)
            return
        upstream = None
        for ip in allowed:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    upstream = await asyncio.open_connection(str(ip), port)
                break
            except (OSError, TimeoutError):
                continue
        if upstream is None:
            await _answer(writer, 502, f"{host}:{port} could not be reached")
            return
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                if not self.budget.take(len(rest)):
                    return
                up_writer.write(rest)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Bytes one way until the source ends or the run's byte budget does."""
        try:
            while True:
                chunk = await src.read(65536)
                if not chunk or not self.budget.take(len(chunk)):
                    break
                dst.write(chunk)
                await dst.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                if dst.can_write_eof():
                    dst.write_eof()
                else:
                    dst.close()
            if self.budget.left < 0:
                dst.close()


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = (reason + "\n").encode("utf-8")
    phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable"}[status]
    writer.write(f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    with contextlib.suppress(OSError):
        await writer.drain()


def proxy_env() -> dict[str, str]:
    """What the sandboxed code's environment says about the proxy."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = ""
    return env

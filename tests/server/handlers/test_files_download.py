"""DownloadAgentMemoryFile against a real loopback web server: the file lands in memory (named from
the URL, typed from the response), redirects are followed, and the provider network policy holds
for the URL and for every redirect; a download over the cap is refused with nothing kept."""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.main import start_server
from seed_agents.server.store import blobs

from tests.conftest import make_config

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


class WebServer:
    """Answers GET /file.csv with `body`, GET /big with `big` bytes, and GET /go?to=URL with a 302."""

    def __init__(self, host: str = "127.0.0.1", body: bytes = b"a,b\n1,2\n", big: int = 0) -> None:
        self.host, self.body, self.big = host, body, big
        self.hits: list[str] = []

    async def __aenter__(self) -> "WebServer":
        self.server = await asyncio.start_server(self._handle, self.host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader, writer) -> None:
        with contextlib.suppress(Exception):
            line = (await reader.readline()).decode()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            path = line.split(" ")[1]
            self.hits.append(path)
            if path.startswith("/go?to="):
                writer.write(f"HTTP/1.1 302 Found\r\nLocation: {path[7:]}\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n".encode())
            elif path == "/big":
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             f"Connection: close\r\n\r\n".encode())
                for _ in range(self.big // 65536):
                    writer.write(b"x" * 65536)
                    await writer.drain()
            else:
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: {len(self.body)}\r\n"
                             "Connection: close\r\n\r\n".encode() + self.body)
            await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def running(tmp_path, **settings):
    settings.setdefault("web_networks", "loopback")   # the fake web is on loopback
    srv = await start_server(make_config(tmp_path, **settings))
    try:
        yield srv
    finally:
        await srv.stop()


async def test_a_download_lands_in_memory_after_a_redirect(tmp_path):
    async with running(tmp_path) as srv, WebServer() as web, AgentsClient.connect(srv.url, Keypair.generate()) as c:
        agent_id = (await c.create_agent(ECHO))["agentId"]
        got = await c.download_agent_memory_file(agent_id, f"{web.url}/go?to={web.url}/data/table")
        assert got["finalUrl"] == f"{web.url}/data/table" and got["contentType"] == "text/csv"
        assert got["entry"]["path"] == "downloads/table.csv" and got["entry"]["size"] == 8
        read = await c.read_agent_memory_file(agent_id, "downloads/table.csv")
        assert read["file"]["content"] == "a,b\n1,2\n"
        named = await c.download_agent_memory_file(agent_id, f"{web.url}/x.csv", "mine/t.csv")
        assert named["entry"]["path"] == "mine/t.csv"
        assert [r["path"] for r in (await c.search_agent_memory(agent_id, "a,b"))["results"]]


async def test_loopback_is_refused_by_default_and_nothing_is_kept(tmp_path):
    # Downloads go under --web-networks, `public` by default even on a loopback server (whose
    # providers may reach loopback, for Ollama).
    async with running(tmp_path, web_networks="") as srv, WebServer() as web, \
            AgentsClient.connect(srv.url, Keypair.generate()) as c:
        agent_id = (await c.create_agent(ECHO))["agentId"]
        with pytest.raises(AgentsError) as exc:
            await c.download_agent_memory_file(agent_id, f"{web.url}/file.csv")
        assert exc.value.status == 403 and "network policy refuses (--web-networks)" in str(exc.value)
        assert web.hits == []   # nothing ever reached the internal address
        assert (await c.list_agent_memory(agent_id))["entries"] == []


async def test_a_redirect_to_a_refused_address_is_refused(tmp_path):
    # 127.0.0.2 is allowed (a CIDR), 127.0.0.1 is not: the redirect must not reach it.
    async with running(tmp_path, web_networks="127.0.0.2/32") as srv, WebServer("127.0.0.2") as outer, \
            WebServer() as inner, AgentsClient.connect(srv.url, Keypair.generate()) as c:
        agent_id = (await c.create_agent(ECHO))["agentId"]
        with pytest.raises(AgentsError) as exc:
            await c.download_agent_memory_file(agent_id, f"{outer.url}/go?to={inner.url}/file.csv")
        assert exc.value.status == 403 and "127.0.0.1" in str(exc.value)
        assert outer.hits and inner.hits == []
        assert (await c.list_agent_memory(agent_id))["entries"] == []


async def test_a_download_over_the_cap_is_413_with_nothing_kept(tmp_path):
    async with running(tmp_path, download_max_bytes=1_000_000) as srv, WebServer(big=5_000_000) as web, \
            AgentsClient.connect(srv.url, Keypair.generate()) as c:
        agent_id = (await c.create_agent(ECHO))["agentId"]
        with pytest.raises(AgentsError) as exc:
            await c.download_agent_memory_file(agent_id, f"{web.url}/big")
        assert exc.value.status == 413
        assert (await c.list_agent_memory(agent_id))["entries"] == []
        assert srv.app.db.read(blobs.counts)["file_chunks"] == 0 and srv.app.db.read(blobs.check) == []

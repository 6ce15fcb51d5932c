"""SIGTERM while a turn waits on its provider, and just after a turn failed, with the sandbox's
self-check started at the same time: the server exits 0 and its log holds no traceback (once, a
stop under load left an "Event loop is closed" traceback there), on SQLite and on PostgreSQL."""
from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from seed_agents.clients import AgentsClient
from seed_agents.protocol.wire.keys import Keypair

from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.procs import ServerProcess
from tests.waiting import until


class Silent:
    """A provider endpoint that accepts connections and never answers (a turn waits on it)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


async def start_turn(url: str, base_url: str, wait_for_error: bool) -> None:
    keypair = Keypair.generate()
    async with AgentsClient.connect(url, keypair) as client:
        await client.set_model_provider("work", {"type": "custom", "baseUrl": base_url,
                                                 "secretRefs": {"apiKey": "provider-work-api-key"}})
        await client.set_secret("provider-work-api-key", b"sk-test")
        agent = (await client.create_agent({"name": "w", "systemPrompt": "", "modelProvider": "work",
                                            "model": "m"}))["agentId"]
        session = (await client.create_session(agent))["sessionId"]
        async with await client.subscribe(f"sessions/{session}") as events:
            await client.message_session(session, "hi")
            if wait_for_error:
                async with asyncio.timeout(30):
                    async for item in events:
                        if item["_"] == "append" and item["event"]["event"].get("type") == "error":
                            return


def server(tmp_path, storage: list[str]) -> ServerProcess:
    return ServerProcess(tmp_path / "srv", extra=["--code-exec", "bubblewrap", "--provider-networks", "loopback",
                                                  *storage]).start()


async def stop_cleanly(srv: ServerProcess) -> None:
    code = await asyncio.to_thread(srv.terminate)
    log = srv.log.read_text()
    assert code == 0, log[-3000:]
    assert "Traceback" not in log and "Event loop is closed" not in log, log[-3000:]
    assert "seed-agents stopped" in log


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request) -> list[str]:
    if request.param == "sqlite":
        return []
    return ["--storage-url", request.getfixturevalue("postgres_url")]


async def test_sigterm_while_a_turn_waits_on_its_provider_exits_0_without_a_traceback(tmp_path, storage):
    silent = Silent()
    srv = server(tmp_path, storage)
    try:
        await start_turn(srv.url, f"http://127.0.0.1:{silent.port}/v1", wait_for_error=False)
        await until(lambda: bool(silent.accepted), 30, step=0.02, what="the turn's request to its provider")
        await stop_cleanly(srv)
    finally:
        srv.kill()
        silent.close()


async def test_sigterm_just_after_a_turn_failed_exits_0_without_a_traceback(tmp_path, storage):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))   # bound, never listening: the provider refuses at once
    srv = server(tmp_path, storage)
    try:
        await start_turn(srv.url, f"http://127.0.0.1:{closed.getsockname()[1]}/v1", wait_for_error=True)
        await stop_cleanly(srv)
    finally:
        srv.kill()
        closed.close()

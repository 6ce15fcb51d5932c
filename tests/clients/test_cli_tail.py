"""`seed-agents tail` follows a session across a server restart and prints each event once."""
from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from seed_agents.clients import AgentsClient
from seed_agents.clients.commands.reply import send_message
from seed_agents.clients.keyfile import write_key
from seed_agents.clients.render import event_line
from seed_agents.protocol.wire.keys import Keypair

from tests.procs import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


async def read_until(stream, last_line: str, lines: list[str], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            raw = await stream.readline()
            assert raw, f"tail ended early after {lines}"
            lines.append(raw.decode().rstrip("\n"))
            if lines[-1] == last_line:
                return


async def test_tail_follows_across_a_server_restart_exactly_once(tmp_path):
    server = ServerProcess(tmp_path / "data")
    await asyncio.to_thread(server.start)
    keypair = Keypair.generate()
    write_key(tmp_path / "key.json", keypair)
    tail = None
    try:
        client = await AgentsClient.connect(server.url, keypair)
        agent_id = (await client.create_agent({"name": "t", "systemPrompt": "", "modelProvider": "echo",
                                               "model": "echo"}))["agentId"]
        session_id = (await client.create_session(agent_id))["sessionId"]
        await client.message_session(session_id, "one")

        env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"))
        tail = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "seed_agents.clients.cli", "tail", session_id, "--url", server.url,
            "--key", str(tmp_path / "key.json"), cwd=str(ROOT), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        lines: list[str] = []
        await read_until(tail.stdout, "#2 assistant: echo: one", lines)

        assert await asyncio.to_thread(server.terminate) == 0
        await asyncio.to_thread(server.start)
        # The test's own client reconnects too; a send racing the drop is retried (same id).
        await send_message(client, session_id, "two")
        await send_message(client, session_id, "three")
        await read_until(tail.stdout, "#6 assistant: echo: three", lines)

        tail.send_signal(signal.SIGINT)
        rest, err = await asyncio.wait_for(tail.communicate(), 10)
        assert tail.returncode == 0, err.decode()
        lines += rest.decode().splitlines()
        # Every stored event exactly once, in order (the two later turns may interleave).
        history = (await client.get_session(session_id))["events"]
        assert lines == [event_line(e) for e in history]
        assert [e["seq"] for e in history] == [1, 2, 3, 4, 5, 6]
        assert sorted(line.split(" ", 1)[1] for line in lines) == sorted(
            ["user: one", "assistant: echo: one", "user: two", "assistant: echo: two",
             "user: three", "assistant: echo: three"])
        assert "reconnect" in err.decode() and "Traceback" not in err.decode()
        await client.close()
    finally:
        if tail is not None and tail.returncode is None:
            tail.kill()
            await tail.wait()
        server.kill()

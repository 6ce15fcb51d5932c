"""What an operator sees of a running server: the start line, one access line per action (no
secret, key or message text at any level), and one server per SQLite database."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.keys import Keypair

from tests.procs import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-VERYSECRET-0123456789"
PRIVATE = "my private words about the merger"


async def short_session(url: str) -> tuple[str, list[tuple[str, int]]]:
    """A few actions; returns the account and the (action, status) pairs the server answered."""
    keypair = Keypair.generate()
    done: list[tuple[str, int]] = []
    async with AgentsClient.connect(url, keypair) as client:
        await client.set_secret("openai-key", SECRET.encode())
        done.append(("SetSecret", 200))
        agent = (await client.create_agent({"name": "a", "systemPrompt": "sys", "modelProvider": "echo",
                                            "model": "echo"}))["agentId"]
        done.append(("CreateAgent", 200))
        session = (await client.create_session(agent))["sessionId"]
        done.append(("CreateSession", 200))
        async with await client.subscribe(f"sessions/{session}") as events:
            done.append(("Subscribe", 200))
            await client.message_session(session, PRIVATE, client_message_id="m1")
            done.append(("MessageSession", 200))
            async for item in events:
                if item["_"] == "append" and item["event"]["event"].get("role") == "assistant":
                    break
        with pytest.raises(AgentsError):
            await client.get_agent("no-such-agent")
        done.append(("GetAgent", 404))
    return keypair.account_id, done


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_one_access_line_per_action_and_no_secret_or_message_text(tmp_path, fmt):
    server = ServerProcess(tmp_path / "data", extra=["--log-level", "DEBUG", "--log-format", fmt])
    await asyncio.to_thread(server.start)
    try:
        account, done = await short_session(server.url)
    finally:
        assert await asyncio.to_thread(server.terminate) == 0
    log = server.log.read_text()
    assert SECRET not in log and PRIVATE not in log and "merger" not in log
    short = f"{account[:8]}…{account[-6:]}"
    if fmt == "json":
        records = [json.loads(line) for line in log.splitlines()]   # every line is one JSON object
        access = [r for r in records if r["logger"] == "seed_agents.access"]
        seen = [(r["action"], r["status"]) for r in access]
        assert all(r["transport"] == "v2" and r["account"] == short and r["ms"] >= 0 and
                   re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"]) for r in access)
        # Library chatter is at DEBUG, never INFO.
        assert not [r for r in records if r["logger"].startswith("websockets") and r["level"] != "DEBUG"]
    else:
        pattern = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z INFO seed_agents\.access: "
                             r"(v1|v2|http) (\w+) (\S+) (\d{3}) ([\d.]+) ms")
        access = [m for m in map(pattern.fullmatch, log.splitlines()) if m]
        seen = [(m[2], int(m[4])) for m in access]
        assert {m[1] for m in access} == {"v2"} and {m[3] for m in access} == {short}
    assert seen == done


async def test_websockets_chatter_is_not_at_info(tmp_path):
    server = ServerProcess(tmp_path / "data")
    await asyncio.to_thread(server.start)   # it polls /api/health: an HTTP request websockets logs
    try:
        await short_session(server.url)
    finally:
        server.terminate()
    lines = server.log.read_text().splitlines()
    assert any("seed_agents.access" in line for line in lines)
    assert not [line for line in lines if " websockets" in line or " httpx" in line], lines


def start_second(data_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "seed_agents.server.console", "serve", "--port", str(free_port()),
                           "--data-dir", str(data_dir)], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=30)


async def test_a_second_server_on_the_same_database_refuses_until_the_first_is_gone(tmp_path):
    data = tmp_path / "data"
    first = ServerProcess(data)
    await asyncio.to_thread(first.start)
    start_line = [line for line in first.log.read_text().splitlines() if "listening on" in line][0]
    assert start_line.endswith(f"seed-agents listening on {first.url} (Seed desktop: "
                               f"http://127.0.0.1:{first.port}; database {data}/agents.sqlite, new database)")
    try:
        second = await asyncio.to_thread(start_second, data)
        assert (second.returncode, second.stdout) == (2, "")
        assert second.stderr == (f"seed-agents: another seed-agents server (pid {first.proc.pid}) is "
                                 f"already using the database {data}/agents.sqlite; stop it first, or "
                                 "give this server its own --data-dir or --db-path\n")
    finally:
        first.kill()   # SIGKILL: no clean-up code runs, the kernel drops the lock
    third = ServerProcess(data, port=free_port())
    await asyncio.to_thread(third.start)
    try:
        assert (data / "agents.sqlite.lock").read_text() == f"{third.proc.pid}\n"
    finally:
        assert await asyncio.to_thread(third.terminate) == 0


async def test_a_second_server_through_a_symlink_to_the_database_refuses(tmp_path):
    # issue 27 finding 9: the lock is named after the resolved file, not the path given.
    data = tmp_path / "data"
    first = ServerProcess(data)
    await asyncio.to_thread(first.start)
    try:
        other = tmp_path / "other"
        other.mkdir()
        (other / "agents.sqlite").symlink_to(data / "agents.sqlite")
        second = await asyncio.to_thread(start_second, other)
        assert second.returncode == 2 and "already using the database" in second.stderr
        assert f"pid {first.proc.pid}" in second.stderr
        linked = tmp_path / "linked"   # the whole folder as a symlink
        linked.symlink_to(data)
        second = await asyncio.to_thread(start_second, linked)
        assert second.returncode == 2 and "already using the database" in second.stderr
    finally:
        first.terminate()

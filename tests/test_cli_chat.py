"""`seed-agents chat`: creates what is missing and streams each reply token by token."""
from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

from clients import AgentsClient
from clients.commands.reply import send_message, stream_reply
from protocol.keys import Keypair

ROOT = Path(__file__).resolve().parents[1]


async def run_chat(tmp_path, url, stdin: bytes, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
               SEED_AGENTS_KEY=str(tmp_path / "key.json"), SEED_AGENTS_URL=url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", "chat", *args, cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 20)
    return proc.returncode, out.decode(), err.decode()


async def test_chat_creates_key_agent_session_and_echoes(server, tmp_path):
    code, out, err = await run_chat(tmp_path, server.url, b"hello world\n\nsecond  line\n/quit\nignored\n")
    assert code == 0, err
    assert out == "echo: hello world\necho: second  line\n"
    assert "created" in err and str(tmp_path / "key.json") in err
    assert stat.S_IMODE((tmp_path / "key.json").stat().st_mode) == 0o600
    # a second chat reuses the key and the agent, and EOF ends it cleanly
    code, out, err = await run_chat(tmp_path, server.url, b"again\n")
    assert (code, out) == (0, "echo: again\n"), err
    assert "no key yet" not in err and "created an echo agent" not in err


async def test_replies_stream_as_several_deltas(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent({"name": "a", "systemPrompt": "", "modelProvider": "echo",
                                               "model": "echo"}))["agentId"]
        session_id = (await client.create_session(agent_id))["sessionId"]
        sub = await client.subscribe(f"sessions/{session_id}", after_seq=0)
        pieces: list[str] = []
        sent = await send_message(client, session_id, "one two three")
        reply = await asyncio.wait_for(stream_reply(sub, sent, pieces.append), 10)
        assert len(pieces) >= 3 and "".join(pieces) == "echo: one two three"
        assert reply["event"]["content"] == "echo: one two three" and reply["seq"] == 2

"""`seed-agents memory ls/cat/put/rm/search` and `send --attach`, as a person runs them: child
processes against a real server."""
from __future__ import annotations

import asyncio
import os
import sys

from seed_agents.server.store import blobs

from tests.clients.test_cli_commands import ROOT, cli_env, run_cli


async def run_bytes(env, *args) -> tuple[int, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seed_agents.server.console", *args, cwd=str(ROOT), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, out, err.decode()


async def test_memory_commands_and_send_with_an_attachment(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, out, err = await run_cli(env, "agents", "create", "--name", "bot", "--system-prompt", "hi")
    assert code == 0, err
    agent = out.strip()
    code, out, err = await run_cli(env, "memory", "put", agent, "notes/trip.md", stdin=b"Lisbon trams are yellow\n")
    assert code == 0 and "notes/trip.md: 24 bytes" in out, err
    big = tmp_path / "video.bin"
    big.write_bytes(os.urandom(3 * 1024 * 1024 + 5))   # over 2 MiB: in chunks
    code, out, err = await run_cli(env, "memory", "put", agent, "media/video.bin", str(big))
    assert code == 0, err
    code, out, err = await run_cli(env, "memory", "ls", agent)
    assert code == 0 and "notes/trip.md" in out and "media/video.bin" in out and "media/" in out, (out, err)
    code, data, err = await run_bytes(env, "memory", "cat", agent, "media/video.bin")
    assert code == 0 and data == big.read_bytes(), err
    code, out, err = await run_cli(env, "memory", "search", agent, "yellow trams")
    assert code == 0 and "notes/trip.md" in out and "**yellow**" in out, (out, err)
    code, out, err = await run_cli(env, "memory", "rm", agent, "media")
    assert code == 0 and "deleted media" in out
    code, out, err = await run_cli(env, "memory", "rm", agent, "media")
    assert code == 1 and "nothing in memory at media" in err
    code, out, err = await run_cli(env, "memory", "cat", agent, "../x")
    assert code == 1 and '".."' in err and "Traceback" not in err

    code, out, err = await run_cli(env, "sessions", "create", agent)
    session = out.strip()
    note = tmp_path / "list.txt"
    note.write_text("eggs, milk")
    code, out, err = await run_cli(env, "send", session, "what is on my list?", "--attach", str(note))
    assert code == 0, err
    assert "what is on my list?" in out   # the echo provider answers the message's text
    assert server.app.db.read(blobs.counts)["session_attachments"] == 1
    assert server.app.db.read(blobs.check) == []

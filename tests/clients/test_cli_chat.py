"""`seed-agents chat`: creates what is missing and streams each reply token by token."""
from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

from seed_agents.clients import AgentsClient
from seed_agents.clients.commands.reply import Screen, follow_run, send_message
from seed_agents.clients.keyfile import read_key
from seed_agents.protocol.wire.keys import Keypair

ROOT = Path(__file__).resolve().parents[2]


async def run_chat(tmp_path, url, stdin: bytes, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
               SEED_AGENTS_KEY=str(tmp_path / "key.json"), SEED_AGENTS_URL=url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seed_agents.clients.cli", "chat", *args, cwd=str(ROOT), env=env,
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
        outcome = await asyncio.wait_for(follow_run(client, session_id, sub, sent, Screen(write=pieces.append)), 10)
        assert len(pieces) >= 4 and "".join(pieces) == "echo: one two three\n"
        assert (outcome.status, outcome.answer) == ("succeeded", "echo: one two three")


async def test_chat_on_a_terminal_edits_recalls_and_obeys_slash_commands(server, tmp_path):
    """Driven through a pseudo-terminal as a person types: arrow keys edit the line, Up recalls
    it, /help and /new work, and the thinking mark is drawn then erased before the reply."""
    import re

    first_session, second_session = await asyncio.to_thread(drive_chat_on_a_terminal, server, tmp_path)
    history = (tmp_path / "home" / ".config" / "seed-agents" / "chat_history").read_text()
    # readline keeps a line recalled and sent again once (no consecutive duplicates).
    assert re.findall(r"hello world|/help|/new|in the new one", history) == [
        "hello world", "/help", "/new", "in the new one"]
    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        first = await client.get_session(first_session)
        second = await client.get_session(second_session)
    assert [e["event"].get("content") for e in first["events"]] == [
        "hello world", "echo: hello world", "hello world", "echo: hello world"]
    assert [e["event"].get("content") for e in second["events"]] == [
        "in the new one", "echo: in the new one"]


def drive_chat_on_a_terminal(server, tmp_path) -> tuple[str, str]:
    import pexpect

    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"), TERM="xterm",
               SEED_AGENTS_KEY=str(tmp_path / "key.json"), SEED_AGENTS_URL=server.url)
    env.pop("INPUTRC", None)
    child = pexpect.spawn(sys.executable, ["-m", "seed_agents.server.console", "chat"], cwd=str(ROOT), env=env,
                          encoding="utf-8", timeout=20, dimensions=(40, 200))
    try:
        child.expect_exact("a new session (made when you send a message). Type a message; /help lists the commands")
        child.expect_exact("you> ")
        # "helo world", then Left x7 (to just after "hel"), insert "l": "hello world".
        child.send("helo world" + "\x1b[D" * 7 + "l\r")
        child.expect(r"\[session ([0-9a-f-]{36})\]")
        first_session = child.match.group(1)
        child.expect_exact("echo: hello world")
        assert "…\b \b" in child.before   # the thinking mark, erased by the first token
        child.expect_exact("you> ")
        child.send("\x1b[A\r")                      # Up: the previous line again
        child.expect_exact("echo: hello world")
        child.expect_exact("you> ")
        child.send("/help\r")
        child.expect_exact("/agent NAME switch to the agent NAME")
        child.expect_exact("you> ")
        child.send("/new\r")
        child.expect_exact("a new session (made when you send a message). Type a message")
        child.expect_exact("you> ")
        child.send("in the new one\r")
        child.expect(r"\[session ([0-9a-f-]{36})\]")
        second_session = child.match.group(1)
        assert second_session != first_session
        child.expect_exact("echo: in the new one")
        child.expect_exact("you> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    return first_session, second_session

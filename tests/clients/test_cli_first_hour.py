"""A newcomer's first hour, the command line's side (issue 28): names and id prefixes wherever an
id is asked, listings with a header row and --json, `sessions stop`, `runs list/show/cancel`,
a provider's stored model as the default, `chat` stopped by Ctrl-C and resumed with --session
(through a pseudo-terminal), TLS against plain HTTP, messages that name commands, completion."""
from __future__ import annotations

import asyncio
import io
import json
import os
import re
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from seed_agents.clients import AgentsClient
from seed_agents.clients.cli import main
from seed_agents.clients.keyfile import read_key

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.clients.test_cli_commands import cli_env, run_cli

ROOT = Path(__file__).resolve().parents[2]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LONG_REPLY = Script(chunks=["word "] * 400, chunk_delay=0.05)   # 20 s unless stopped


@pytest.fixture
async def fake():
    async with FakeOpenAI() as server:
        yield server


async def cli(env: dict, *args: str) -> tuple[int, str, str]:
    """`seed-agents ARGS` in this process (a thread of its own), with `env`'s SEED_AGENTS_*
    variables: the same `seed_agents.clients.cli.main`, without a child's start-up cost."""
    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        saved = {k: os.environ.get(k) for k in env if k.startswith("SEED_AGENTS_") or k == "FAKE_KEY"}
        for name in ("SEED_AGENTS_URL", "SEED_AGENTS_ACCOUNT"):
            saved.setdefault(name, os.environ.get(name))
            os.environ.pop(name, None)
        os.environ.update({k: env[k] for k in saved if k in env})
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = main(list(args))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return code, out.getvalue(), err.getvalue()

    return await asyncio.to_thread(run)


async def ok(env, *args) -> str:
    code, out, err = await cli(env, *args)
    assert code == 0, (args, err)
    return out


async def test_names_and_prefixes_work_wherever_an_id_is_asked(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    llama = (await ok(env, "agents", "create", "--name", "llama")).strip()
    other = (await ok(env, "agents", "create", "--name", "other")).strip()
    # by name
    session = (await ok(env, "sessions", "create", "llama", "--title", "first talk")).strip()
    assert re.fullmatch(UUID, session)
    # by a unique id prefix, and by title
    assert await ok(env, "send", session[:6], "hello") == "echo: hello\n"
    assert (await ok(env, "history", "first talk")).splitlines() == ["#1 user: hello", "#2 assistant: echo: hello"]
    # piped chat with --agent NAME
    code, out, err = await run_cli(env, "chat", "--agent", "llama", stdin=b"hi\n")
    assert (code, out) == (0, "echo: hi\n"), err
    assert f"agent {llama}," in err
    # an unknown name, and an ambiguous prefix that lists the candidates
    code, _, err = await cli(env, "sessions", "create", "nobody")
    assert (code, err) == (1, "seed-agents: no agent is named 'nobody' or has an id starting with it; "
                              "`seed-agents agents list` shows yours\n")
    common = os.path.commonprefix([llama, other])
    if common:   # (two random UUIDs share a first character one time in 16)
        code, _, err = await cli(env, "agents", "delete", common)
        assert code == 1 and f"matches 2 agents: " in err and "(llama)" in err and "(other)" in err
    code, _, err = await cli(env, "agents", "delete", "")
    assert code == 1 and "matches 2 agents" in err and "give more of the id" in err

    # listings: a header row, names, --json
    lines = (await ok(env, "sessions", "list")).splitlines()
    assert lines[0].split() == ["ID", "AGENT", "STATUS", "UPDATED", "TITLE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows[session].split()[1] == "llama" and rows[session].endswith("first talk")
    listed = json.loads(await ok(env, "sessions", "list", "--agent", "llama", "--json"))
    assert [s["id"] for s in listed if s["title"] == "first talk"] == [session]
    assert all(s["agentId"] == llama for s in listed)
    agents = (await ok(env, "agents", "list")).splitlines()
    assert agents[0].split() == ["ID", "NAME", "STATUS", "PROVIDER/MODEL", "UPDATED"]
    assert {a["definition"]["name"] for a in json.loads(await ok(env, "agents", "list", "--json"))} == {
        "llama", "other"}
    await ok(env, "agents", "delete", "other")
    assert "other" not in await ok(env, "agents", "list")


async def test_sessions_stop_and_runs_list_show_cancel(server, tmp_path, fake):
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await ok(env, "keygen")
    await ok(env, "providers", "set", "slow", "--type", "custom", "--base-url", fake.base_url,
             "--api-key-env", "FAKE_KEY", "--model", "fake-model")
    # the provider's stored model is the agent's default
    agent = (await ok(env, "agents", "create", "--name", "slowbot", "--provider", "slow")).strip()
    listed = json.loads(await ok(env, "agents", "list", "--json"))
    assert [a["definition"]["model"] for a in listed if a["id"] == agent] == ["fake-model"]
    session = (await ok(env, "sessions", "create", "slowbot", "--title", "long one")).strip()
    keypair = read_key(tmp_path / "key.json")

    async with AgentsClient.connect(server.url, keypair) as client:
        async def started(session_id: str) -> str:
            sub = await client.subscribe(f"sessions/{session_id}")
            fake.enqueue(LONG_REPLY)
            sent = await client.message_session(session_id, "talk a lot")
            async for item in sub:
                if item["_"] == "appendPartial":
                    break
            await sub.close()
            return sent["runId"]

        run = await started(session)
        out = await ok(env, "runs", "list")
        lines = out.splitlines()
        assert lines[0].split() == ["ID", "STATUS", "AGENT", "SESSION", "CREATED", "ERROR"]
        assert [line.split()[:4] for line in lines[1:]] == [[run, "running", "slowbot", session[:8]]]
        assert json.loads(await ok(env, "runs", "list", "--session", "long one", "--json"))[0]["id"] == run
        shown = await ok(env, "runs", "show", run[:7])
        assert f"id:       {run}" in shown and "status:   running" in shown and f"session:  {session}" in shown
        assert await ok(env, "sessions", "stop", "long one") == f"stopped session {session}\n"
        assert (await client.get_run(run))["run"]["status"] == "canceled"
        assert (await client.get_session(session, limit=1))["session"]["status"] != "streaming"
        assert await ok(env, "sessions", "stop", session) == f"session {session} had nothing running\n"

        run = await started(session)
        assert await ok(env, "runs", "cancel", run[:8]) == f"canceled run {run}\n"
        assert await ok(env, "runs", "cancel", run) == f"run {run} had already ended (canceled)\n"
        canceled = json.loads(await ok(env, "runs", "list", "--agent", "slowbot", "--status", "canceled", "--json"))
        assert len(canceled) == 2


async def test_agents_create_without_a_model_needs_one_stored_and_says_so_in_commands(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    await ok(env, "keygen")
    await ok(env, "providers", "set", "local", "--type", "ollama")
    code, _, err = await cli(env, "agents", "create", "--name", "x", "--provider", "local")
    assert (code, err) == (1, "seed-agents: the provider 'local' has no model of its own: give --model, or "
                              "store one with `seed-agents providers set local ... --model MODEL`\n")
    code, _, err = await cli(env, "agents", "create", "--name", "x", "--provider", "nope", "--model", "m")
    assert code == 1 and "`seed-agents providers set nope ...`" in err and "SetModelProvider" not in err
    await ok(env, "providers", "set", "local", "--type", "ollama", "--model", "llama3.2")
    agent = (await ok(env, "agents", "create", "--name", "llama", "--provider", "local")).strip()
    assert json.loads(await ok(env, "agents", "list", "--json"))[0]["definition"]["model"] == "llama3.2"
    assert agent


async def test_an_https_url_against_the_plain_http_server_says_so(server, tmp_path):
    env = cli_env(tmp_path)
    await ok(env, "keygen")
    code, out, err = await cli(env, "agents", "list", "--url", f"https://127.0.0.1:{server.port}")
    assert (code, out) == (1, "")
    assert err == (f"seed-agents: 127.0.0.1:{server.port} speaks plain HTTP, not TLS (https:// / wss://): use "
                   f"http://127.0.0.1:{server.port} (or ws://127.0.0.1:{server.port}/agents/ws) in --url / "
                   "SEED_AGENTS_URL\n")


async def test_shell_completion_for_bash_and_zsh(tmp_path):
    env = cli_env(tmp_path)
    for shell in ("bash", "zsh"):
        code, out, err = await cli(env, "completion", shell)
        assert code == 0 and "_python_argcomplete" in out and "seed-agents" in out, err
    # What the shell code does on Tab: ask the command itself, which answers from its parser.
    for line, wanted in (("seed-agents sessions st", {"stop"}),):
        completion_env = dict(env, _ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE=line,
                              COMP_POINT=str(len(line)))
        # argcomplete answers on file descriptor 8, as the shell code arranges it.
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", f'"{sys.executable}" -m seed_agents.server.console 8>&1 9>/dev/null', cwd=str(ROOT),
            env=completion_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out, _ = await asyncio.wait_for(proc.communicate(), 20)
        words = set(out.decode().split())
        assert words == wanted, (line, words)


# -- chat through a pseudo-terminal ------------------------------------------------------------
async def test_chat_ctrl_c_stops_the_reply_returns_to_the_prompt_and_resumes(server, tmp_path, fake):
    env = cli_env(tmp_path, server.url, FAKE_KEY="sk-fake")
    await ok(env, "keygen")
    await ok(env, "providers", "set", "slow", "--type", "custom", "--base-url", fake.base_url,
             "--api-key-env", "FAKE_KEY", "--model", "fake-model")
    await ok(env, "agents", "create", "--name", "talker", "--provider", "slow")
    keypair = read_key(tmp_path / "key.json")
    fake.enqueue(Script(chunks=["short answer"]), LONG_REPLY, Script(chunks=["after the stop"]))

    async with AgentsClient.connect(server.url, keypair) as client:
        checked: dict = {}

        async def check_stopped(session_id: str) -> None:
            """Right after `[stopped]`: the run is canceled and the session no longer streams."""
            runs = (await client.list_runs(session_id=session_id))["runs"]
            checked["run"] = runs[0]["status"]
            checked["session"] = (await client.get_session(session_id, limit=1))["session"]["status"]

        loop = asyncio.get_running_loop()
        session = await asyncio.to_thread(drive_ctrl_c, env, lambda sid: asyncio.run_coroutine_threadsafe(
            check_stopped(sid), loop).result(10))
        assert checked == {"run": "canceled", "session": "idle"}
        events = (await client.get_session(session))["events"]
    contents = [(e["event"].get("role"), e["event"].get("content")) for e in events if e["event"].get("type") == "message"]
    assert contents[:2] == [("user", "first"), ("assistant", "short answer")]
    assert ("user", "tell me everything") in contents and contents[-2:] == [
        ("user", "and now?"), ("assistant", "after the stop")]

    # --session goes back to it, by title prefix or id, showing its recent events
    await asyncio.to_thread(drive_resume, env, session)


def spawn_chat(env, *args):
    import pexpect

    env = dict(env, TERM="xterm")
    env.pop("INPUTRC", None)
    return pexpect.spawn(sys.executable, ["-m", "seed_agents.server.console", "chat", *args], cwd=str(ROOT), env=env,
                         encoding="utf-8", timeout=20, dimensions=(40, 200))


def drive_ctrl_c(env, check_stopped) -> str:
    import pexpect

    child = spawn_chat(env, "--agent", "talker")
    try:
        child.expect_exact("a new session (made when you send a message). Type a message; /help lists the "
                           "commands, Ctrl-C stops a reply")
        child.expect_exact("you> ")
        child.send("first\r")
        child.expect(rf"\[session ({UUID})\]")
        session = child.match.group(1)
        child.expect_exact("short answer")
        child.expect_exact("you> ")
        child.send("tell me everything\r")
        child.expect_exact("word word word")
        child.sendintr()                             # Ctrl-C mid-reply
        child.expect_exact("[stopped]")
        check_stopped(session)
        child.expect_exact("you> ")
        child.send("and now?\r")                     # the chat goes on
        child.expect_exact("after the stop")
        child.expect_exact("you> ")
        child.sendintr()                             # Ctrl-C at an empty prompt: a hint
        child.expect_exact("(Ctrl-C again, /quit or Ctrl-D leaves)")
        child.expect_exact("you> ")
        child.sendintr()                             # a second one leaves
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "Traceback" not in child.before
    return session


def drive_resume(env, session: str) -> None:
    import pexpect

    child = spawn_chat(env, "--session", session[:8])
    try:
        child.expect_exact("user: and now?")
        child.expect_exact("assistant: after the stop")
        child.expect_exact(f"session {session} (resumed: its last")
        child.expect_exact("you> ")
        child.send("/quit\r")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before

"""The `seed-agents` command as a person runs it: a child process against a real server."""
from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import sys
import uuid
from pathlib import Path

import pytest

from clients.cli import main
from clients.commands.common import explain
from clients.errors import AgentsError
from tests.procs import free_port

ROOT = Path(__file__).resolve().parents[1]


def cli_env(tmp_path, url=None, **extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
               SEED_AGENTS_KEY=str(tmp_path / "key.json"), **extra)
    env.pop("SEED_AGENTS_URL", None)
    if url:
        env["SEED_AGENTS_URL"] = url
    return env


async def run_cli(env, *args, stdin: bytes | None = None, timeout: float = 20.0):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clients.cli", *args, cwd=str(ROOT), env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    return proc.returncode, out.decode(), err.decode()


async def test_keygen_writes_0600_prints_the_account_and_refuses_to_overwrite(tmp_path):
    env = cli_env(tmp_path)
    code, out, err = await run_cli(env, "keygen")
    assert code == 0, err
    account = out.strip()
    assert account.startswith("z6Mk")
    key = tmp_path / "key.json"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    before = key.read_bytes()
    code, out, err = await run_cli(env, "keygen")
    assert code == 1 and "refusing to overwrite" in err and "Traceback" not in err
    assert key.read_bytes() == before
    code, out, _ = await run_cli(env, "whoami")
    assert code == 0 and out.strip() == account
    # --key wins over SEED_AGENTS_KEY
    other = tmp_path / "other" / "k.json"
    code, out, _ = await run_cli(env, "keygen", "--key", str(other))
    assert code == 0 and other.exists() and out.strip() != account


async def test_agents_sessions_send_and_history(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, out, err = await run_cli(env, "agents", "create", "--name", "bot", "--system-prompt", "hi")
    assert code == 0, err
    agent_id = out.strip()
    code, out, _ = await run_cli(env, "agents", "list")
    assert agent_id in out and "bot" in out and "echo/echo" in out
    code, out, err = await run_cli(env, "sessions", "create", agent_id, "--title", "demo")
    assert code == 0, err
    session_id = out.strip()
    code, out, _ = await run_cli(env, "sessions", "list", "--agent", agent_id)
    assert session_id in out and "demo" in out

    code, out, err = await run_cli(env, "send", session_id, "hello there")
    assert code == 0, err
    assert out == "echo: hello there\n"
    code, out, err = await run_cli(env, "send", session_id, "again")
    assert (code, out) == (0, "echo: again\n"), err
    code, out, _ = await run_cli(env, "history", session_id)
    assert out.splitlines() == ["#1 user: hello there", "#2 assistant: echo: hello there",
                                "#3 user: again", "#4 assistant: echo: again"]
    code, out, _ = await run_cli(env, "history", session_id, "--after-seq", "3")
    assert out.splitlines() == ["#4 assistant: echo: again"]


async def test_not_found_says_what(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    await run_cli(env, "keygen")
    missing = str(uuid.uuid4())
    code, out, err = await run_cli(env, "sessions", "create", missing)
    assert code == 1 and f"agent {missing} not found" in err and "Traceback" not in err


async def test_refused_connection_prints_the_friendly_message(tmp_path):
    url = f"ws://127.0.0.1:{free_port()}/agents/ws"
    env = cli_env(tmp_path)
    await run_cli(env, "keygen")
    code, out, err = await run_cli(env, "agents", "list", "--url", url)
    assert code == 1 and out == ""
    assert err.strip() == (f"seed-agents: cannot reach the Seed Agents server at {url} — is it "
                           "running? start it with `make run` or `seed-agents serve`")


async def test_missing_key_is_explained(tmp_path):
    code, _, err = await run_cli(cli_env(tmp_path), "agents", "list")
    assert code == 1 and "seed-agents keygen" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["keygen"], ["whoami"], ["agents", "create"], ["agents", "list"],
                                     ["sessions", "create"], ["sessions", "list"], ["send"],
                                     ["history"], ["chat"], ["tail"]])
def test_every_subcommand_has_help_url_and_key(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "--url" in out and "--key" in out


async def test_serve_delegates_to_the_server_and_returns_its_status(tmp_path):
    code, out, _ = await run_cli(cli_env(tmp_path), "serve", "--help")
    assert code == 0 and "--db-path" in out and "--max-frame-bytes" in out
    db = tmp_path / "future.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 999")
    code, _, err = await run_cli(cli_env(tmp_path), "serve", "--port", str(free_port()),
                                 "--db-path", str(db), "--data-dir", str(tmp_path))
    assert code == 2 and "999" in err


@pytest.mark.parametrize("status, words", [
    (401, "clock"), (404, "check the id"), (403, "not allowed"), (429, "rate limiting"),
])
def test_explain_words_statuses_for_people(status, words):
    assert words in explain(AgentsError(status, "x"), "ws://h/agents/ws")

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

from seed_agents.clients.cli import main
from seed_agents.clients.commands.common import explain
from seed_agents.clients.errors import AgentsError

from tests.procs import free_port

ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp_path, url=None, **extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
               SEED_AGENTS_KEY=str(tmp_path / "key.json"), **extra)
    env.pop("SEED_AGENTS_URL", None)
    if url:
        env["SEED_AGENTS_URL"] = url
    return env


async def run_cli(env, *args, stdin: bytes | None = None, timeout: float = 20.0,
                  module: str = "seed_agents.server.console"):
    """`seed-agents ARGS...` as installed (seed_agents.server.console dispatches to seed_agents.clients.cli)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, cwd=str(ROOT), env=env,
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


async def test_a_bad_url_is_diagnosed_in_one_sentence_with_a_hint(server, tmp_path):
    env = cli_env(tmp_path)
    await run_cli(env, "keygen")
    port = free_port()
    cases = [
        (f"ws://127.0.0.1:{port}/agents/ws",
         f"nothing listens at 127.0.0.1:{port} (connection refused): start the server with "
         "`make run` or `seed-agents serve`, or check the port in --url / SEED_AGENTS_URL"),
        (server.url.replace("/agents/ws", "/wrong"),
         f"{server.url.replace('/agents/ws', '/wrong')} is not a Seed Agents server (HTTP 404 at "
         f"/wrong): the server's WebSocket is at the path /agents/ws, e.g. {server.url}"),
        ("127.0.0.1:3050",
         "the server URL '127.0.0.1:3050' needs ws:// or wss:// (e.g. "
         "ws://127.0.0.1:3050/agents/ws), or the Seed desktop's http://HOST:PORT; set it with "
         "--url or SEED_AGENTS_URL"),
        ("ftp://127.0.0.1:3050/agents/ws",
         "the server URL 'ftp://127.0.0.1:3050/agents/ws' needs ws:// or wss:// (e.g. "
         "ws://127.0.0.1:3050/agents/ws), or the Seed desktop's http://HOST:PORT; set it with "
         "--url or SEED_AGENTS_URL"),
        # The desktop's URL is mapped to the WebSocket beside it, and diagnosed as that.
        (f"http://127.0.0.1:{port}",
         f"nothing listens at 127.0.0.1:{port} (connection refused): start the server with "
         "`make run` or `seed-agents serve`, or check the port in --url / SEED_AGENTS_URL"),
        (server.url.replace("ws://", "http://").replace("/agents/ws", "/wrong"),
         f"{server.url.replace('/agents/ws', '/wrong/agents/ws')} is not a Seed Agents server "
         f"(HTTP 404 at /wrong/agents/ws): the server's WebSocket is at the path /agents/ws, e.g. "
         f"{server.url}"),
    ]
    for url, sentence in cases:
        code, out, err = await run_cli(env, "agents", "list", "--url", url)
        assert (code, out, err) == (1, "", f"seed-agents: {sentence}\n"), url


async def test_the_seed_desktop_url_works_for_every_command(server, tmp_path):
    """A person may paste the desktop's http://HOST:PORT: the CLI uses the WebSocket beside it,
    subscriptions included (send streams its reply over one)."""
    env = cli_env(tmp_path)
    await run_cli(env, "keygen")
    base = server.url.replace("ws://", "http://").replace("/agents/ws", "")
    for url in (base, base + "/", base + "/agents/ws"):
        code, out, err = await run_cli(env, "agents", "create", "--name", "a", "--url", url)
        assert code == 0 and out.strip(), (url, err)
    code, session_id, err = await run_cli(env, "sessions", "create", out.strip(), "--url", base)
    assert code == 0, err
    code, out, err = await run_cli(env, "send", session_id.strip(), "hi", "--url", base)
    assert (code, out) == (0, "echo: hi\n"), err


@pytest.mark.parametrize("url,expected", [
    ("http://127.0.0.1:3050", "ws://127.0.0.1:3050/agents/ws"),
    ("http://127.0.0.1:3050/", "ws://127.0.0.1:3050/agents/ws"),
    ("https://agents.example.org", "wss://agents.example.org/agents/ws"),
    ("https://example.org/seed/agents/ws", "wss://example.org/seed/agents/ws"),
    ("http://[::1]:3050/api/message", "ws://[::1]:3050/agents/ws"),
    ("ws://127.0.0.1:3050/agents/ws", "ws://127.0.0.1:3050/agents/ws"),
])
def test_http_urls_map_to_their_websocket(url, expected):
    import argparse

    from seed_agents.clients.commands.common import checked_url

    assert checked_url(argparse.Namespace(url=url)) == expected


def test_an_unknown_host_is_named():
    # Resolving a name would leave loopback, so the mapping is checked from the resolver's error.
    import socket

    from seed_agents.clients.transport import _describe

    detail, cause = _describe(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    err = AgentsError.unreachable("ws://agnets.example:3050/agents/ws", detail, cause=cause)
    assert explain(err, err.url) == (
        "unknown host 'agnets.example' in ws://agnets.example:3050/agents/ws: check the host name "
        "in --url / SEED_AGENTS_URL (the local server is ws://127.0.0.1:3050/agents/ws)")


async def test_missing_key_is_explained(tmp_path):
    code, _, err = await run_cli(cli_env(tmp_path), "agents", "list")
    assert code == 1 and "seed-agents keygen" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["keygen"], ["whoami"], ["agents", "create"], ["agents", "list"],
                                     ["sessions", "create"], ["sessions", "list"], ["send"],
                                     ["history"], ["chat"], ["tail"], ["providers", "set"],
                                     ["providers", "list"], ["providers", "delete"]])
def test_every_subcommand_has_help_url_and_key(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "--url" in out and "--key" in out


def test_clients_never_import_server():
    from tests.imports import imports_of

    for path in sorted((ROOT / "clients").rglob("*.py")):
        imported = imports_of(path, everywhere=True)
        assert not [n for n in imported if n == "server" or n.startswith("server.")], path


async def test_clients_cli_alone_points_serve_to_the_installed_command(tmp_path):
    code, out, err = await run_cli(cli_env(tmp_path), "serve", "--help", module="seed_agents.clients.cli")
    assert (code, out) == (2, "") and "seed_agents.server.console" in err


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
    (401, "clock"), (404, "nothing this account owns or shares has that id"), (403, "not allowed"), (429, "rate limiting"),
])
def test_explain_words_statuses_for_people(status, words):
    assert words in explain(AgentsError(status, "x"), "ws://h/agents/ws")

"""A newcomer's first hour, the server's side (issue 28): the secrets key checked at every start
on SQLite too, nothing written before the port is bound, the start line (absolute database path,
`new database`, `[::1]`), the per-user data dir outside a checkout, /metrics exposure, the front
page and JSON refusals, passwords blanked only where they are, unpadded base64 keys."""
from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import httpx

from seed_agents.clients import AgentsClient
from seed_agents.protocol.wire.keys import Keypair

from tests.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(1, 33))).decode()


def serve_env(tmp_path, **extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
               XDG_DATA_HOME=str(tmp_path / "xdg"), **extra)
    for name in ("SEED_AGENTS_DATA_DIR", "SEED_AGENTS_DB_PATH", "SEED_AGENTS_STORAGE_URL"):
        env.pop(name, None)
    return env


class Served:
    """`seed-agents serve ARGS` as a child; `line` is its start line once it listens."""

    def __init__(self, args: list[str], env: dict, cwd) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "seed_agents.server.console", "serve", *args], cwd=str(cwd),
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.line = ""

    def wait_listening(self, timeout: float = 20) -> "Served":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.rstrip("\n"))
            if "listening on" in line:
                self.line = line.rstrip("\n")
                return self
        raise AssertionError(f"no start line: {self.lines} (exit {self.proc.poll()})")

    def finish(self, timeout: float = 20) -> tuple[int, str]:
        # Read through the same buffered file as readline() did (communicate(timeout=...) reads
        # the raw pipe and would miss what readline() had already buffered).
        out = self.proc.stdout.read()
        self.proc.wait(timeout)
        return self.proc.returncode, "\n".join(self.lines) + ("\n" if self.lines else "") + out

    def stop(self) -> int:
        """SIGTERM; the exit status (`output`: everything it printed)."""
        self.proc.terminate()
        code, self.output = self.finish()
        return code


def serve_once(args, env, cwd, timeout=20) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "seed_agents.server.console", "serve", *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


async def store_provider_key(url: str, keypair: Keypair, name: str = "work") -> None:
    async with AgentsClient.connect(url, keypair) as client:
        await client.set_model_provider(name, {"type": "custom", "baseUrl": "http://127.0.0.1:9/v1",
                                               "secretRefs": {"apiKey": f"provider-{name}-api-key"}})
        await client.set_secret(f"provider-{name}-api-key", b"sk-test")


# -- the secrets key --------------------------------------------------------------------------
async def test_sqlite_refuses_a_changed_secrets_key_unless_told_then_names_the_provider(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    args = ["--port", str(port), "--data-dir", str(data)]
    first = await asyncio.to_thread(lambda: Served(args, serve_env(tmp_path, SEED_AGENTS_SECRETS_KEY=KEY_A),
                                                   tmp_path).wait_listening())
    keypair = Keypair.generate()
    try:
        await store_provider_key(f"ws://127.0.0.1:{port}/agents/ws", keypair)
    finally:
        assert await asyncio.to_thread(first.stop) == 0

    # Another key: refused before it listens, one sentence, exit 2.
    code, out = await asyncio.to_thread(serve_once, args, serve_env(tmp_path, SEED_AGENTS_SECRETS_KEY=KEY_B),
                                        tmp_path)
    assert code == 2, out
    assert out == (f"seed-agents: the secrets in {data}/agents.sqlite were sealed with another secrets "
                   "key than this server's (SEED_AGENTS_SECRETS_KEY, else <data-dir>/secrets.key): start "
                   "it with the key they were sealed with, or with --accept-new-secrets-key true to start "
                   "anyway and set each provider's key again (`seed-agents providers set NAME ...`)\n")

    # A database from before the check (no check value, a secret sealed under A) is refused too
    # (on a copy, read as the start reads it).
    from seed_agents.server.database.sqlite.gate import open_database
    from seed_agents.server.store import key_check
    from seed_agents.server.store.secrets import SecretBox

    shutil.copy(data / "agents.sqlite", tmp_path / "older.sqlite")
    older = open_database(str(tmp_path / "older.sqlite"))
    try:
        older.execute("DELETE FROM server_config WHERE key = 'secrets_key_check'")
        assert not key_check.same_key(older, SecretBox(base64.b64decode(KEY_B)))
        assert older.execute("SELECT count(*) FROM server_config WHERE key = 'secrets_key_check'").fetchone()[0] == 0
        assert key_check.same_key(older, SecretBox(base64.b64decode(KEY_A)))   # and then recorded
    finally:
        older.close()

    # Told to start anyway: it starts, and the turn that needs the old secret fails in one
    # sentence naming the provider and the command that fixes it (no traceback in the log).
    forced = await asyncio.to_thread(lambda: Served(args + ["--accept-new-secrets-key", "true"],
                                                    serve_env(tmp_path, SEED_AGENTS_SECRETS_KEY=KEY_B),
                                                    tmp_path).wait_listening())
    try:
        async with AgentsClient.connect(f"ws://127.0.0.1:{port}/agents/ws", keypair) as client:
            agent = (await client.create_agent({"name": "w", "systemPrompt": "", "modelProvider": "work",
                                                "model": "m"}))["agentId"]
            session = (await client.create_session(agent))["sessionId"]
            async with await client.subscribe(f"sessions/{session}") as events:
                await client.message_session(session, "hi")
                async for item in events:
                    if item["_"] == "append" and item["event"]["event"].get("type") == "error":
                        message = item["event"]["event"]["message"]
                        break
    finally:
        await asyncio.to_thread(forced.stop)
        log = forced.output
    assert message == ("the API key of provider 'work' cannot be opened with this server's secrets key "
                       "(it was stored under another one): set it again with `seed-agents providers set "
                       "work ...`")
    assert "Traceback" not in log
    # The database now records key B: what a plain start with B checks passes.
    recorded = open_database(str(data / "agents.sqlite"))
    try:
        assert key_check.same_key(recorded, SecretBox(base64.b64decode(KEY_B)))
        assert not key_check.same_key(recorded, SecretBox(base64.b64decode(KEY_A)))
    finally:
        recorded.close()


def test_an_unpadded_base64_secrets_key_is_accepted(tmp_path):
    from seed_agents.server.store.secrets import load_secrets_key

    unpadded = base64.b64encode(bytes(range(32))).decode().rstrip("=")
    assert not unpadded.endswith("=")
    assert load_secrets_key(str(tmp_path), {"SEED_AGENTS_SECRETS_KEY": unpadded}) == bytes(range(32))
    urlsafe = base64.urlsafe_b64encode(bytes(range(200, 232))).decode().rstrip("=")
    assert load_secrets_key(str(tmp_path), {"SEED_AGENTS_SECRETS_KEY": urlsafe}) == bytes(range(200, 232))


# -- starting -----------------------------------------------------------------------------------
def test_a_taken_port_leaves_no_file_behind(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = serve_once(["--port", str(port)], serve_env(tmp_path), work)
    assert code == 1 and out.startswith(f"seed-agents: cannot listen on 127.0.0.1:{port}"), out
    assert list(work.iterdir()) == [] and not (tmp_path / "xdg").exists()


def test_outside_a_checkout_the_data_goes_to_the_per_user_folder_and_the_start_line_says_new(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = serve_env(tmp_path)
    server = Served(["--port", "0"], env, work).wait_listening()
    assert server.stop() == 0
    db = tmp_path / "xdg" / "seed-agents" / "agents.sqlite"
    assert db.exists() and list(work.iterdir()) == []
    assert server.line.endswith(f"; database {db}, new database)"), server.line
    again = Served(["--port", "0"], env, work).wait_listening()
    assert again.stop() == 0
    assert again.line.endswith(f"; database {db})"), again.line   # the same one, not new


def test_in_a_checkout_the_default_stays_data(tmp_path, monkeypatch):
    """(`make run` in a checkout: tests/repo/test_readme.py sees its start line name ./data.)"""
    from seed_agents.server.config import default_data_dir, load_config

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text('[project]\nname = "seed-agents"\n')
    assert default_data_dir(str(checkout)) == "./data"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir(str(tmp_path)) == str(tmp_path / "xdg" / "seed-agents")
    monkeypatch.chdir(checkout)
    config = load_config(None, {})
    assert (config.data_dir, config.db_path) == ("./data", "./data/agents.sqlite")
    config = load_config(None, {"SEED_AGENTS_DATA_DIR": "/srv/agents"})
    assert (config.data_dir, config.db_path) == ("/srv/agents", "/srv/agents/agents.sqlite")


def test_an_ipv6_host_is_bracketed_in_the_urls(tmp_path):
    server = Served(["--host", "::1", "--port", "0", "--data-dir", str(tmp_path / "d")], serve_env(tmp_path),
                    tmp_path).wait_listening()
    assert server.stop() == 0
    assert "listening on ws://[::1]:" in server.line and "(Seed desktop: http://[::1]:" in server.line


def test_metrics_beyond_loopback_warn_and_can_be_moved_or_turned_off(tmp_path):
    port, metrics_port = free_port(), free_port()
    wide = Served(["--host", "0.0.0.0", "--port", str(port), "--data-dir", str(tmp_path / "a")],
                  serve_env(tmp_path), tmp_path).wait_listening()
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    finally:
        wide.stop()
    assert (f"/metrics is served on the server's port (0.0.0.0:{port}), reachable beyond this machine: "
            "set --metrics-listen off, or --metrics-listen 127.0.0.1:9464 to serve it on loopback only"
            ) in wide.output

    moved = Served(["--host", "0.0.0.0", "--port", str(port), "--data-dir", str(tmp_path / "b"),
                    "--metrics-listen", f"127.0.0.1:{metrics_port}"], serve_env(tmp_path), tmp_path).wait_listening()
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 404
        r = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)
        assert r.status_code == 200 and "seed_agents_connections" in r.text
    finally:
        moved.stop()
    assert "/metrics is served" not in moved.output

    # off: no warning, and the route is gone (what the framing answers without a listener)
    from seed_agents.protocol.wire.framing_http import HttpFraming
    from seed_agents.server.config import Config
    from seed_agents.server.main import exposure_warnings

    assert exposure_warnings(Config(host="0.0.0.0", metrics_listen="off")) == []
    assert exposure_warnings(Config(host="0.0.0.0", metrics_listen="0.0.0.0:9464"))[0].startswith(
        "/metrics is served on 0.0.0.0:9464, reachable beyond this machine")
    assert exposure_warnings(Config(host="127.0.0.1")) == []
    assert HttpFraming(max_frame=1, max_depth=1, metrics=False).route_request("GET", "/metrics").kind == "not_found"


# -- HTTP: the front page and JSON refusals ------------------------------------------------------
async def test_the_front_page_is_html_for_a_browser_and_json_for_a_json_client(server):
    base = f"http://127.0.0.1:{server.port}"
    async with httpx.AsyncClient() as http:
        page = await http.get(base + "/", headers={"Accept": "text/html"})
        value = (await http.get(base + "/", headers={"Accept": "application/json"})).json()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for words in ("Seed Agents server", "Version 0.1.0", "Connect the Seed desktop",
                  f"Paste <code>http://127.0.0.1:{server.port}</code> into the desktop", "docs/"):
        assert words in page.text, words
    assert value["name"] == "Seed Agents server" and value["version"] == metadata.version("seed-agents")
    assert value["health"]["status"] == "ok" and value["health"]["url"] == "/api/health"
    assert value["desktop"]["url"] == f"http://127.0.0.1:{server.port}"
    assert value["websocket"] == f"ws://127.0.0.1:{server.port}/agents/ws"
    assert "docs/" in value["docs"] and isinstance(value["schemaVersion"], int)


async def test_json_clients_get_json_refusals(server):
    base = f"http://127.0.0.1:{server.port}"
    json_accept = {"Accept": "application/json"}
    async with httpx.AsyncClient() as http:
        r415 = await http.post(base + "/api/message", content=b"{}",
                               headers={**json_accept, "Content-Type": "application/json"})
        r405 = await http.get(base + "/api/message", headers=json_accept)
        r404 = await http.get(base + "/nope", headers=json_accept)
        cbor405 = await http.get(base + "/api/message")   # a CBOR client still gets CBOR
    assert r415.status_code == 415 and r415.headers["content-type"] == "application/json"
    assert r415.json()["code"] == 415 and "application/cbor" in r415.json()["message"]
    assert r405.status_code == 405 and r405.json()["message"].startswith("GET is not allowed on /api/message")
    assert r404.status_code == 404 and r404.json()["status"] == "error"
    assert cbor405.status_code == 405 and cbor405.headers["content-type"] == "application/cbor"


# -- passwords ------------------------------------------------------------------------------------
def test_a_short_password_is_blanked_in_urls_and_as_a_word_never_inside_other_words():
    from seed_agents.server.database.url import parse_storage_url, scrub

    url = parse_storage_url("postgresql://seed:p@127.0.0.1:5999/agents")
    text = ('connection to server at "127.0.0.1", port 5999 failed: postgresql://seed:p@127.0.0.1:5999/agents '
            "password=p")
    assert scrub(text, url) == ('connection to server at "127.0.0.1", port 5999 failed: '
                                "postgresql://seed:***@127.0.0.1:5999/agents password=***")
    assert scrub("FATAL: password p refused", url) == "FATAL: password *** refused"


async def test_a_postgresql_start_line_shows_the_url_without_its_password(tmp_path, postgres_url):
    from seed_agents.server.main import start_line, start_server
    from seed_agents.server.database.url import parse_storage_url

    from tests.conftest import make_config

    cfg = make_config(tmp_path)
    cfg.storage_url = parse_storage_url(postgres_url)
    running = await start_server(cfg)
    try:
        line = start_line(running)
    finally:
        await running.stop()
    password = parse_storage_url(postgres_url).dsn().split("@")[0].rpartition(":")[2]
    assert "database postgresql://" in line and ":***@" in line and f":{password}@" not in line
    assert line.endswith(", new database)")   # a fresh schema, as SQLite says of a new file
    again = await start_server(cfg)
    try:
        assert not start_line(again).endswith(", new database)")
    finally:
        await again.stop()

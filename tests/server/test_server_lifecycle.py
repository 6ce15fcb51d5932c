"""`seed-agents serve` as a process: the schema gate refuses before listening (exit 2), and
SIGTERM stops it cleanly with sockets closed 1001 and acknowledged writes kept."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from seed_agents import schema

from tests.procs import ROOT, ServerProcess, free_port
from tests.wsraw import V2Client, keypair, setup_session


def run_serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seed_agents.server.main", "--port", str(free_port()), *args],
                          cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=timeout)


def test_gate_refuses_garbage_and_newer_databases_with_exit_2(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    before = garbage.read_bytes()
    r = run_serve("--db-path", str(garbage), "--data-dir", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert garbage.read_bytes() == before

    import apsw

    newer = tmp_path / "newer.sqlite"
    conn = apsw.Connection(str(newer))
    conn.execute("CREATE TABLE t(x); PRAGMA user_version = 99")
    conn.close()
    r = run_serve("--db-path", str(newer), "--data-dir", str(tmp_path))
    assert r.returncode == 2
    assert "found: 99" in r.stderr and f"expects: {schema.CURRENT_VERSION}" in r.stderr   # names both versions


async def test_sigterm_closes_sockets_with_1001_and_keeps_writes(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    a = keypair("A")
    try:
        c = await V2Client.open(srv.url)
        _, session_id = await setup_session(c, a, title="kept")
        code = await asyncio.to_thread(srv.terminate)
        assert code == 0
        await asyncio.wait_for(c.ws.wait_closed(), 10)
        assert c.ws.close_code == 1001
        srv.start()
        c = await V2Client.open(srv.url)
        got = await c.call(a, {"_": "GetSession", "sessionId": session_id})
        assert got["session"]["title"] == "kept"
        await c.close()
    finally:
        srv.kill()
    log = (tmp_path / "srv" / "server.log").read_text()
    assert "listening on ws://127.0.0.1:" in log

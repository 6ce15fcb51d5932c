"""Issue 32, finding 3: a hostile MCP server's listing cannot freeze the server. Over real
sockets, a server child process and a remote MCP server made with the SDK's own server (a child
process too: tests/fakes/mcp_server.py `fat`, 100 tools of 55 KB schemas, which froze the server
26 s): the listing is checked off the event loop and within --mcp-timeout, SetMcpServer and
RefreshMcpServer answer in about that time, and an honest client's GetSession stays fast
meanwhile. The caps: servers per account, tools per server, schema bytes."""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import pytest

from seed_agents.server.config import Config

from tests.hostile_measure import HonestReader, percentile
from tests.procs import ROOT, ServerProcess, free_port
from tests.repo.test_docs_limits import documented_default
from tests.server.handlers.test_lifecycle_sessions import call
from tests.server.runtime.test_runtime_turns import send
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

# The listing's deadline: `fat` takes far longer than this to check (over 30 s at load 12), and an
# honest listing far less. The production default (30 s) is docs/operations.md's, checked by
# tests/repo/test_docs_limits.py.
TIMEOUT = 3.0
FLAGS = ["--rate-limit", "100000", "--rate-burst", "100000", "--mcp-timeout", str(TIMEOUT)]


def test_the_production_deadline_is_the_documented_one():
    """The tests here run on shorter deadlines (TIMEOUT, CALL_TIMEOUT); a server not told
    otherwise gives a remote MCP server the 30 s docs/operations.md says."""
    assert Config().mcp_timeout == documented_default("--mcp-timeout") == 30


def mcp_child(kind: str, arg: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.mcp_server", str(port), kind, arg], cwd=str(ROOT),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    assert line.strip() == "ready", line
    return proc, f"http://127.0.0.1:{port}/mcp"


async def warm_listing_worker(c: V2Client, kp) -> None:
    """One small discovery first, so a listing worker has started (the SDK's imports take seconds
    on a busy machine, once per worker): what follows measures the hostile listing alone."""
    many, many_url = mcp_child("many", "3")
    try:
        r = await call(c, kp, {"_": "SetMcpServer", "name": "warm", "url": many_url})
        assert r["server"]["status"]["state"] == "ok", r
        r = await call(c, kp, {"_": "DeleteMcpServer", "name": "warm"})
        assert r["_"] == "DeleteMcpServerResponse", r
    finally:
        many.kill()
        many.wait(10)


@pytest.fixture
def fat():
    proc, url = mcp_child("fat", "100")
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(10)


async def test_a_hostile_listing_is_checked_off_the_loop_within_the_timeout(tmp_path, fat):
    srv = ServerProcess(tmp_path / "srv", extra=FLAGS).start(timeout=60)
    attacker, honest_kp = keypair("mcp attacker"), keypair("honest")
    a, h = await V2Client.open(srv.url), await V2Client.open(srv.url)
    try:
        _, mine = await setup_session(h, honest_kp)
        await send(h, honest_kp, mine, "hello")
        await warm_listing_worker(a, attacker)
        quiet = HonestReader(h, honest_kp, mine).start()
        await until(lambda: len(quiet.latencies) >= 30, 30, what="quiet GetSession latencies")
        quiet = await quiet.stop()

        honest = HonestReader(h, honest_kp, mine).start()
        started = time.monotonic()
        r = await call(a, attacker, {"_": "SetMcpServer", "name": "fat", "url": fat})
        took = time.monotonic() - started
        assert r["_"] == "SetMcpServerResponse", r
        status = r["server"]["status"]
        # 100 schemas of 55 KB cost more than the timeout to check: the discovery says so.
        assert status["state"] == "error" and "--mcp-timeout" in status["error"], status
        started = time.monotonic()
        r = await call(a, attacker, {"_": "RefreshMcpServer", "name": "fat"})
        took_refresh = time.monotonic() - started
        assert (r["_"], r["status"]) == ("Error", 502) and "--mcp-timeout" in r["message"], r
        loud = await honest.stop()
        print(f"\nSetMcpServer {took:.1f} s, RefreshMcpServer {took_refresh:.1f} s (--mcp-timeout {TIMEOUT:g}); "
              f"honest GetSession p99 {percentile(quiet, 0.99) * 1000:.1f} ms quiet, "
              f"{percentile(loud, 0.99) * 1000:.1f} ms during ({len(loud)} reads)")
        assert took < TIMEOUT + 10 and took_refresh < TIMEOUT + 10   # was 26 s, whatever the timeout
        assert len(loud) > 20 and percentile(loud, 0.99) < max(1.0, 20 * percentile(quiet, 0.99)), loud
    finally:
        await a.close()
        await h.close()
        srv.kill()


async def test_a_huge_listing_page_is_parsed_off_the_server(tmp_path):
    """A page of some 15 MB (1,000 tools described in 15 KB each): the SDK parses a page in one
    call that holds the GIL, which stopped the server's loop for seconds even on a thread; it is
    now parsed in the listing worker, and the honest client's reads go on meanwhile."""
    huge, huge_url = mcp_child("huge", "1000")
    srv = ServerProcess(tmp_path / "srv", extra=[*FLAGS[:4], "--mcp-timeout", "60"]).start(timeout=60)
    attacker, honest_kp = keypair("mcp attacker"), keypair("honest")
    a, h = await V2Client.open(srv.url), await V2Client.open(srv.url)
    try:
        _, mine = await setup_session(h, honest_kp)
        await send(h, honest_kp, mine, "hello")
        await warm_listing_worker(a, attacker)
        quiet = HonestReader(h, honest_kp, mine).start()
        await until(lambda: len(quiet.latencies) >= 30, 30, what="quiet GetSession latencies")
        quiet = await quiet.stop()
        honest = HonestReader(h, honest_kp, mine).start()
        for name in ("huge", "huge2"):
            r = await call(a, attacker, {"_": "SetMcpServer", "name": name, "url": huge_url})
            assert r["_"] == "SetMcpServerResponse" and r["server"]["status"]["state"] == "ok", r
            assert r["server"]["toolCount"] == 1000, r["server"]["status"]
        loud = await honest.stop()
        print(f"\nhonest GetSession p99 {percentile(quiet, 0.99) * 1000:.1f} ms quiet, "
              f"{percentile(loud, 0.99) * 1000:.1f} ms (max {max(loud) * 1000:.0f} ms) during two 15 MB listings "
              f"({len(loud)} reads)")
        assert len(loud) > 20 and percentile(loud, 0.99) < max(0.25, 10 * percentile(quiet, 0.99)), loud
    finally:
        await a.close()
        await h.close()
        srv.kill()
        huge.kill()
        huge.wait(10)


async def bulky_agent(c: V2Client, kp, url: str) -> str:
    """A session of an agent that has picked the `bulky` MCP server (its tools huge and slow)."""
    agent_id, sid = await setup_session(c, kp)
    r = await call(c, kp, {"_": "SetMcpServer", "name": "bulky", "url": url})   # (starts a worker)
    assert r["server"]["status"]["state"] == "ok", r
    agent = (await call(c, kp, {"_": "GetAgent", "agentId": agent_id}))["agent"]
    r = await call(c, kp, {"_": "UpdateAgent", "agentId": agent_id,
                           "definition": {**agent["definition"], "mcpServers": ["bulky"]}})
    assert r["_"] == "GetAgentResponse", r
    return sid


# The tool calls' deadline: each 6 MB result must come within it (0.8-1.6 s each at load 11), and
# the slow tool's call waits it out (it was 20 s).
CALL_TIMEOUT = 8.0


async def test_a_hostile_tool_result_is_parsed_off_the_server(tmp_path):
    """Tool calls run in the MCP workers too: a 6 MB tool result (12 MB of JSON, the text and its
    structured copy, which the SDK parses in one call that holds the GIL: in the server that
    stopped its loop for seconds) comes back cut to what
    the model may see while the honest client's reads go on, and a tool that never answers ends
    at --mcp-timeout with the phrase, its worker killed (the remote sees the request go)."""
    bulky, url = mcp_child("bulky", "6")
    srv = ServerProcess(tmp_path / "srv", extra=[*FLAGS[:4], "--mcp-timeout", f"{CALL_TIMEOUT:g}"]).start(timeout=60)
    attacker, honest_kp = keypair("mcp attacker"), keypair("honest")
    a, h = await V2Client.open(srv.url), await V2Client.open(srv.url)
    try:
        _, mine = await setup_session(h, honest_kp)
        await send(h, honest_kp, mine, "hello")
        sid = await bulky_agent(a, attacker, url)

        def invoke(tool: str):  # noqa: ANN202
            return a.call(attacker, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                                     "input": {"tool": tool, "input": {}}}, timeout=120)

        # Two calls at once first, so two workers have started (the SDK's imports take seconds on
        # a busy machine, once per worker, not charged to the remote) and are kept: what follows
        # measures the hostile results alone.
        for r in await asyncio.gather(invoke("bulky__huge"), invoke("bulky__huge")):
            assert "output" in r, r
        quiet = HonestReader(h, honest_kp, mine).start()
        await until(lambda: len(quiet.latencies) >= 30, 30, what="quiet GetSession latencies")
        quiet = await quiet.stop()

        honest = HonestReader(h, honest_kp, mine).start()
        slow = asyncio.ensure_future(invoke("bulky__slow"))
        started = time.monotonic()
        for _ in range(3):
            r = await invoke("bulky__huge")
            assert "output" in r, r
            # Cut to 256 KiB in the worker (MAX_RESULT_BYTES), then to --max-tool-output-chars.
            out = r["output"]
            size = int(re.search(r"This result was (\d+) characters", out["note"]).group(1))
            assert out["truncated"] and out["content"].startswith('{"text": "zzz') and size < 300_000, out["note"]
        r = await slow
        took = time.monotonic() - started
        loud = await honest.stop()
        assert "did not answer in time (--mcp-timeout)" in r["error"], r
        # It waited out its deadline, then ended at it.
        assert CALL_TIMEOUT - 1 < took < CALL_TIMEOUT + 10, took
        print(f"\nhonest GetSession p99 {percentile(quiet, 0.99) * 1000:.1f} ms quiet, "
              f"{percentile(loud, 0.99) * 1000:.1f} ms (max {max(loud) * 1000:.0f} ms) during three 6 MB tool "
              f"results and one that never came ({len(loud)} reads)")
        assert len(loud) > 20 and percentile(loud, 0.99) < max(0.25, 10 * percentile(quiet, 0.99)), loud
        # A stall delays one read however long it lasts, so the p99 of reads paced 10 ms apart
        # hides it: the slowest read is the figure. In the server, each result stopped the loop
        # 3.2 s (max 3228 ms, p99 17 ms, load 10); in the worker the slowest was 0.4 s at load 13.
        assert max(loud) < 1.5, max(loud)
    finally:
        await a.close()
        await h.close()
        srv.kill()
        bulky.kill()
        bulky.wait(10)


async def test_the_caps_on_servers_tools_and_schema_bytes(tmp_path, fat):
    many, many_url = mcp_child("many", "30")
    srv = ServerProcess(tmp_path / "srv", extra=[*FLAGS[:4], "--mcp-timeout", "60", "--mcp-max-servers", "2",
                                                 "--mcp-max-tools", "20", "--mcp-max-schema-bytes", "4096"]
                        ).start(timeout=60)
    kp = keypair("mcp caps")
    c = await V2Client.open(srv.url)
    try:
        r = await call(c, kp, {"_": "SetMcpServer", "name": "many", "url": many_url})
        status = r["server"]["status"]
        assert status["state"] == "ok" and status["skipped"] == 10 and r["server"]["toolCount"] == 20, r
        # Every schema of `fat` is over 4 KiB: left out before any is checked, so quickly.
        started = time.monotonic()
        r = await call(c, kp, {"_": "SetMcpServer", "name": "fat", "url": fat})
        status = r["server"]["status"]
        assert status["state"] == "ok" and r["server"]["toolCount"] == 0 and status["skipped"] == 100, r
        assert time.monotonic() - started < 20
        r = await call(c, kp, {"_": "SetMcpServer", "name": "third", "url": many_url})
        assert (r["_"], r["status"]) == ("Error", 409) and "--mcp-max-servers" in r["message"], r
        r = await call(c, kp, {"_": "SetMcpServer", "name": "many", "url": many_url, "enabled": False})
        assert r["_"] == "SetMcpServerResponse", r   # an existing name may still change
        assert [s["name"] for s in (await call(c, kp, {"_": "ListMcpServers"}))["servers"]] == ["fat", "many"]
    finally:
        await c.close()
        srv.kill()
        many.kill()
        many.wait(10)


@pytest.mark.slow
async def test_an_honest_get_session_p99_stays_under_50_ms_during_hostile_listings(tmp_path, fat):
    """The issue's budget, for a quiet machine (make stress): three discoveries of the hostile
    listing in a row while an honest client reads its own session."""
    srv = ServerProcess(tmp_path / "srv", extra=FLAGS).start(timeout=60)
    attacker, honest_kp = keypair("mcp attacker"), keypair("honest")
    a, h = await V2Client.open(srv.url), await V2Client.open(srv.url)
    try:
        _, mine = await setup_session(h, honest_kp)
        await send(h, honest_kp, mine, "hello")
        await warm_listing_worker(a, attacker)
        r = await call(a, attacker, {"_": "SetMcpServer", "name": "fat", "url": fat})
        honest = HonestReader(h, honest_kp, mine).start()
        for _ in range(3):
            r = await call(a, attacker, {"_": "RefreshMcpServer", "name": "fat"})
            assert r["_"] in ("Error", "RefreshMcpServerResponse"), r
        loud = await honest.stop()
        print(f"\nhonest GetSession during 3 hostile listings: p50 {percentile(loud, 0.5) * 1000:.1f} ms, "
              f"p99 {percentile(loud, 0.99) * 1000:.1f} ms ({len(loud)} reads)")
        assert percentile(loud, 0.99) < 0.050
    finally:
        await a.close()
        await h.close()
        srv.kill()

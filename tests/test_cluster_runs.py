"""Runs across servers on one PostgreSQL store: claims, leases, requeue, exactly-once answers,
and StopSession reaching a run that another server executes.

Real servers (in-process, and one child process that is SIGKILLed) on one fresh PostgreSQL
schema each (tests/pg.py), a real fake provider on loopback, real sockets.
"""
from __future__ import annotations

import asyncio
import contextlib

from server.storage.url import parse_storage_url
from tests.conftest import make_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.procs import ServerProcess
from tests.wsraw import V2Client, flatten, keypair, setup_session

LEASE = 2.0   # seconds: short, so a lost server's runs come back within a test's time


def pg_config(tmp_path, url: str, name: str):
    cfg = make_config(tmp_path / name, run_lease=LEASE, run_poll_interval=0.2)
    cfg.storage_url = parse_storage_url(url)
    return cfg


@contextlib.asynccontextmanager
async def servers(tmp_path, url: str, count: int):
    from server.main import start_server

    running = []
    try:
        for i in range(count):
            running.append(await start_server(pg_config(tmp_path, url, f"s{i}")))
        yield running
    finally:
        for r in running:
            await r.stop()


async def send(c, kp, session_id: str, text: str) -> dict:
    r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                          "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    return r


async def events_of(c, kp, session_id: str) -> list[dict]:
    r = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
    assert r["_"] == "GetSessionResponse", r
    return r["events"]


async def wait_session(c, kp, session_id: str, status: str, timeout: float = 15.0) -> dict:
    """Polls GetSession (a condition, bounded in time) until the session has `status`."""
    async with asyncio.timeout(timeout):
        while True:
            got = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
            if got["session"]["status"] == status:
                return got
            await asyncio.sleep(0.05)


def messages(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["event"]["role"], e["event"]["content"]) for e in events if e["event"].get("type") == "message"]


async def test_a_turn_completes_on_postgresql(tmp_path, postgres_url):
    a = keypair("A")
    async with servers(tmp_path, postgres_url, 1) as (s,):
        c = await V2Client.open(s.url)
        _, sid = await setup_session(c, a)
        await c.call(a, {"_": "Subscribe", "key": f"sessions/{sid}"})
        await send(c, a, sid, "hello there")
        appends = []
        async with asyncio.timeout(10):
            while len(appends) < 2:
                appends += flatten(await c.event())
        assert [e["event"]["content"] for e in appends] == ["hello there", "echo: hello there"]
        got = await wait_session(c, a, sid, "idle")
        assert messages(got["events"]) == [("user", "hello there"), ("assistant", "echo: hello there")]
        runs = (await c.call(a, {"_": "ListRuns", "sessionId": sid}))["runs"]
        assert [(r["status"], r["attempt"]) for r in runs] == [("succeeded", 1)]
        await c.close()

"""SIGKILL the server between a tool call and its result: after restart the run resumes from its
last recorded step. A side-effecting call (a memory write that downloads a page) is never run
twice for one recorded call (the fake web's own request log says how often the page was
fetched): the model is told it was interrupted. A read-only call (navigate) simply runs again.
One round by default (a server start costs seconds); 20, alternating, behind `slow`."""
from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.fakes.web_server import FakeWeb
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.procs import ServerProcess
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair


async def settled(c, kp, sid) -> dict:
    async def ended() -> dict | None:
        got = await c.call(kp, {"_": "GetSession", "sessionId": sid})
        events = [e["event"] for e in got["events"]]
        if got["session"]["status"] != "streaming" and events[-1]["type"] in ("message", "error") \
                and events[-1].get("role") != "user":
            return got
        return None

    return await until(ended, 30, step=0.05, what="the turn settled")


async def kill_rounds(tmp_path, rounds: int) -> None:
    srv = ServerProcess(tmp_path / "srv", extra=["--allow-provider-base-url", "true",
                                                 "--web-networks", "loopback"]).start()
    try:
        async with FakeOpenAI() as fake, FakeWeb() as web:
            for i in range(rounds):
                side_effect = i % 2 == 0 or rounds == 1
                path = f"/slow{i}"
                web.slow(path, 30.0, f"page {i}")
                if side_effect:
                    tool = call(f"w{i}", "write", {"address": f"~/memory/r{i}.txt",
                                                  "options": {"fromUrl": web.url(path)}})
                else:
                    tool = call(f"n{i}", "call", {"tool": "navigate", "input": {"url": web.url(path)}})
                fake.enqueue(Script(chunks=[], tool_calls=[tool]), Script(chunks=[f"done {i}"]))
                kp = keypair(f"kill-{i}")
                c = await V2Client.open(srv.url)
                _, sid = await agent_session(c, kp, "custom", fake.base_url)
                await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "go"}]})
                # The call is recorded, and the tool is running (the page was asked for): kill.
                await c.event_where(lambda e: e.get("_") == "append" and e["event"]["event"]["type"] == "tool_call",
                                    timeout=15)
                await until(lambda: ("GET", path) in web.requests, 10, step=0.01, what=f"GET {path}")
                srv.kill()
                await c.close()
                if not side_effect:
                    web.page(path, f"<html><body><article><p>page {i} is here now</p></article></body></html>")
                srv.start()
                c = await V2Client.open(srv.url)
                got = await settled(c, kp, sid)
                events = [e["event"] for e in got["events"]]
                assert [e["type"] for e in events] == ["message", "tool_call", "tool_result", "message"], events
                result = events[2]
                fetches = web.requests.count(("GET", path))
                if side_effect:
                    assert "interrupted" in result["error"] and fetches == 1, (result, fetches)
                    memory = await c.call(kp, {"_": "GetSession", "sessionId": sid})
                    assert memory["_"] == "GetSessionResponse"
                else:
                    assert "page" in result["output"]["markdown"] and fetches == 2, (result, fetches)
                assert events[3]["content"] == f"done {i}"
                runs = (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
                assert runs[0]["status"] == "succeeded"
                await c.close()
    finally:
        srv.kill()


async def test_kill_between_call_and_result(tmp_path):
    await kill_rounds(tmp_path, 1)   # the side-effecting call (the read-only one: behind slow)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_kill_between_call_and_result_20_rounds(tmp_path):
    await kill_rounds(tmp_path, 20)


async def test_a_run_taken_over_on_postgresql_continues_from_its_last_step(tmp_path, postgres_url):
    """Server A records a call and dies with the tool running; server B (same PostgreSQL) takes
    the run when A's lease runs out and continues it from the recorded call."""
    from seed_agents.server.main import start_server
    from seed_agents.server.database.url import parse_storage_url

    from tests.conftest import make_config

    a = ServerProcess(tmp_path / "a", extra=["--allow-provider-base-url", "true", "--web-networks", "loopback",
                                             "--storage-url", postgres_url,
                                             "--run-lease", "1", "--run-poll-interval", "0.2"]).start()
    b = None
    try:
        async with FakeOpenAI() as fake, FakeWeb() as web:
            web.slow("/slow", 30.0)
            fake.enqueue(Script(chunks=[], tool_calls=[
                call("w1", "write", {"address": "~/memory/a.txt", "options": {"fromUrl": web.url("/slow")}})]),
                Script(chunks=["continued on b"]))
            kp = keypair("takeover")
            c = await V2Client.open(a.url)
            _, sid = await agent_session(c, kp, "custom", fake.base_url)
            await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "go"}]})
            await c.event_where(lambda e: e.get("_") == "append" and e["event"]["event"]["type"] == "tool_call",
                                timeout=15)
            await until(lambda: ("GET", "/slow") in web.requests, 10, step=0.01, what="GET /slow")
            a.kill()
            await c.close()
            cfg = make_config(tmp_path / "b", allow_provider_base_url=True, run_lease=1, run_poll_interval=0.2,
                              web_networks="loopback")
            cfg.storage_url = parse_storage_url(postgres_url)
            b = await start_server(cfg)
            c = await V2Client.open(b.url)
            got = await settled(c, kp, sid)
            events = [e["event"] for e in got["events"]]
            assert [e["type"] for e in events] == ["message", "tool_call", "tool_result", "message"], events
            assert "interrupted" in events[2]["error"] and events[3]["content"] == "continued on b"
            assert web.requests.count(("GET", "/slow")) == 1
            runs = (await c.call(kp, {"_": "ListRuns", "sessionId": sid}))["runs"]
            assert runs[0]["status"] == "succeeded" and runs[0]["attempt"] == 2
            await c.close()
    finally:
        a.kill()
        if b is not None:
            await b.stop()

"""SIGKILL the server while a reply streams from a slow provider: after restart the run is
requeued and completes, the user message is not duplicated, and exactly one reply lands."""
from __future__ import annotations

import asyncio

from tests.procs import FakeProcess, ServerProcess
from tests.server.runtime.test_runtime_turns import provider_session
from tests.waiting import until
from tests.wsraw import V2Client, keypair


async def test_kill_while_streaming_then_requeue_and_finish(tmp_path):
    a = keypair("A")
    fake = FakeProcess("plain")
    srv = ServerProcess(tmp_path / "srv").start()
    try:
        # A slow stream for the first request only; the requeued run gets a quick answer.
        fake.script(chunks=["one ", "two ", "three"], chunk_delay=5.0)
        c = await V2Client.open(srv.url)
        _, sid = await provider_session(c, a, fake)
        await c.call(a, {"_": "MessageSession", "sessionId": sid,
                         "content": [{"type": "text", "text": "tell me"}], "clientMessageId": "m1"})
        async with asyncio.timeout(15):   # wait until the reply is mid-stream
            while True:
                e = await c.event()
                if e["_"] == "appendPartial" and "textDelta" in e["patch"]:   # (activity comes first)
                    break
        srv.kill()
        await c.close()
        srv.start()
        c = await V2Client.open(srv.url)
        async def answered():
            got = await c.call(a, {"_": "GetSession", "sessionId": sid})
            return got if got["session"]["status"] == "idle" and len(got["events"]) >= 2 else None
        got = await until(answered, 10, step=0.05)
        kinds = [(e["event"]["type"], e["event"].get("role")) for e in got["events"]]
        assert kinds == [("message", "user"), ("message", "assistant")], got["events"]
        assert got["events"][1]["event"]["content"] == "Hello from the fake"  # the plain mode reply
        assert got["session"]["status"] == "idle"
        # the same clientMessageId after the crash still does nothing new
        r = await c.call(a, {"_": "MessageSession", "sessionId": sid,
                             "content": [{"type": "text", "text": "tell me"}], "clientMessageId": "m1"})
        # the answer names the stored user event; no user event was added (that would happen
        # before the answer), so no new run can follow
        assert r["_"] == "MessageSessionResponse" and r["userEventId"] == got["events"][0]["id"], r
        assert len((await c.call(a, {"_": "GetSession", "sessionId": sid}))["events"]) == 2
        await c.close()
    finally:
        srv.kill()
        fake.close()

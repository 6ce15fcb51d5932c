"""The agent runtime against a fake OpenAI-compatible server that is a real HTTP server on
127.0.0.1: streamed replies, provider failures, StopSession, ordering and concurrency."""
from __future__ import annotations

import asyncio

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.waiting import until
from tests.wsraw import V2Client, flatten, keypair
from tests.model_view import without_preamble

API_KEY = "sk-test-DO-NOT-LEAK-7f3a"



async def provider_session(c, kp, fake, *, system="You are terse."):
    r = await c.call(kp, {"_": "SetSecret", "name": "fake-key", "value": API_KEY.encode()})
    assert r["_"] == "SetSecretResponse" and r["secret"]["name"] == "fake-key" and r["secret"]["hasValue"] is True
    r = await c.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {
        "type": "custom", "baseUrl": fake.base_url, "secretRefs": {"apiKey": "fake-key"},
        "modelDefaults": {"temperature": 0.25}}})
    assert r["_"] == "SetModelProviderResponse" and r["provider"]["name"] == "fake"
    r = await c.call(kp, {"_": "CreateAgent", "definition": {
        "name": "Fake", "systemPrompt": system, "modelProvider": "fake", "model": "fake-model"}})
    agent_id = r["agentId"]
    r = await c.call(kp, {"_": "CreateSession", "agentId": agent_id})
    session_id = r["sessionId"]
    await c.call(kp, {"_": "Subscribe", "key": f"sessions/{session_id}"})
    return agent_id, session_id


async def until_durable(c, n_appends, timeout=20):
    """Events until `n_appends` durable appends have arrived (after the replay marker)."""
    events, appends = [], []
    async with asyncio.timeout(timeout):
        while len(appends) < n_appends:
            e = await c.event(timeout)
            events.append(e)
            appends += flatten(e)
    return events, appends


async def send(c, kp, session_id, text, **extra):
    action = {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": text}]}
    action.update(extra)
    r = await c.call(kp, action)
    assert r["_"] == "MessageSessionResponse", r
    return r


async def session_status(c, kp, session_id, want, timeout=5.0):
    """The session's GetSession answer once its status is `want`."""
    async def reached() -> dict | None:
        got = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
        return got if got["session"]["status"] == want else None

    return await until(reached, timeout, step=0.05, what=f"session {session_id} {want}")


def events_count(c, kp, session_id, n):
    """A condition: the session's GetSession answer once it holds `n` events."""
    async def counted() -> dict | None:
        got = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
        return got if len(got["events"]) == n else None
    return counted


async def test_streamed_reply_usage_and_history(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["Hel", "lo", " there"])) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()   # change, replayed
        await c.call(a, {"_": "MessageSession", "sessionId": sid, "content": [
            {"type": "text", "text": "first"}, {"type": "context", "lines": ["note A", "note B"]}]})
        events, appends = await until_durable(c, 2)
        partials = [e["patch"] for e in events if e["_"] == "appendPartial"]
        assert [p["textDelta"] for p in partials if "textDelta" in p] == ["Hel", "lo", " there"]
        assert partials[-1]["done"] is True
        reply = appends[1]["event"]
        assert reply["role"] == "assistant" and reply["content"] == "Hello there"
        meta = reply["meta"]
        assert meta["provider"] == "custom" and meta["model"] == "fake-model"
        assert meta["usage"] == {"input": 7, "output": 2, "cacheRead": 3, "cacheWrite": 0, "total": 9}
        assert isinstance(meta["durationMs"], int)
        await session_status(c, a, sid, "idle")
        await send(c, a, sid, "second")
        await until_durable(c, 2)
        first, second = fake.requests[-2].body, fake.requests[-1].body
        assert fake.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"
        assert first["model"] == "fake-model" and first["stream"] is True and first["temperature"] == 0.25
        assert without_preamble(first["messages"]) == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "first\n\nContext:\nnote A\nnote B"}]
        # The tools it can use, from their declarations; `call` names what it reaches.
        assert [t["function"]["name"] for t in first["tools"]] == ["read", "write", "call", "plan", "status", "delegate",
                                                                       "continue_session"]
        assert "\n- search — " in first["tools"][2]["function"]["description"]
        assert without_preamble(second["messages"]) == without_preamble(first["messages"]) + [
            {"role": "assistant", "content": "Hello there"}, {"role": "user", "content": "second"}]
        # the key never comes back from any action
        listed = await c.call(a, {"_": "ListModelProviders"})
        assert API_KEY not in repr(listed)
        await c.close()


async def test_provider_failures_become_durable_errors_and_the_next_turn_works(server):
    a = keypair("A")
    async with FakeOpenAI() as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        fake.enqueue(Script(status=500, error_body=f'{{"error": "boom with {API_KEY}"}}'))
        await send(c, a, sid, "fail please")
        _, appends = await until_durable(c, 2)
        err = appends[1]["event"]
        assert err["type"] == "error" and "500" in err["message"] and API_KEY not in err["message"]
        got = await session_status(c, a, sid, "error")
        run = await c.call(a, {"_": "Subscribe", "key": f"runs/{got['events'][0]['id']}"})
        assert run["_"] == "Error"  # a run id is not an event id
        fake.enqueue(Script(chunks=["par", "tial"], drop_after=1))
        await send(c, a, sid, "drop please")
        _, appends = await until_durable(c, 2)
        assert appends[1]["event"]["type"] == "error"
        await session_status(c, a, sid, "error")
        await send(c, a, sid, "now work")
        _, appends = await until_durable(c, 2)
        assert appends[1]["event"]["content"] == "Hello world"
        await session_status(c, a, sid, "idle")
        await c.close()


async def test_refused_connection_is_a_durable_error(server):
    import socket

    a = keypair("A")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now

    class Dead:
        base_url = f"http://127.0.0.1:{port}/v1"

    c = await V2Client.open(server.url)
    _, sid = await provider_session(c, a, Dead)
    await c.event(); await c.event()
    await send(c, a, sid, "anyone?")
    _, appends = await until_durable(c, 2)
    message = appends[1]["event"]["message"]   # the provider named by its type; its URL only in the log
    assert appends[1]["event"]["type"] == "error" and "refused the connection" in message and "127.0.0.1" not in message
    await c.close()


async def test_a_stopped_reply_keeps_what_it_had_streamed(server):
    """The user watched "Hello" stream in, then pressed Stop: the log keeps it as the assistant's
    message (as the reference's does), with the run's meta, and the run ends canceled."""
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["Hello", " world"], chunk_delay=30)) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        run_id = (await send(c, a, sid, "greet me"))["runId"]
        await c.event_where(lambda e: e.get("_") == "appendPartial" and e["patch"].get("textDelta") == "Hello")
        r = await c.call(a, {"_": "StopSession", "sessionId": sid})
        assert r == {"_": "StopSessionResponse", "sessionId": sid, "stopped": True}
        got = await until(events_count(c, a, sid, 2), 5, step=0.05, what="the stopped reply")
        reply = got["events"][1]["event"]
        assert (reply["role"], reply["content"]) == ("assistant", "Hello")
        assert reply["meta"]["runId"] == run_id and reply["meta"]["model"] == "fake-model"
        assert (await c.call(a, {"_": "GetRun", "runId": run_id}))["run"]["status"] == "canceled"
        await c.close()


async def test_stop_session_cancels_a_slow_first_token(server):
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30)) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        r = await send(c, a, sid, "slow")
        await fake.wait_for_requests(1)
        await c.call(a, {"_": "Subscribe", "key": f"runs/{r['runId']}"})
        r2 = await c.call(a, {"_": "StopSession", "sessionId": sid})
        assert r2 == {"_": "StopSessionResponse", "sessionId": sid, "stopped": True}
        await fake.wait_for_disconnect()
        seen_done, run_status = False, None
        async with asyncio.timeout(10):
            while not (seen_done and run_status == "canceled"):
                e = await c.event()
                if e["_"] == "appendPartial" and e["patch"].get("done"):
                    seen_done = True
                if e["_"] == "change" and e["key"].startswith("runs/"):
                    run_status = e["value"]["status"]
        await session_status(c, a, sid, "idle")
        # Nothing had streamed: the log says the reply was stopped, as the reference's does.
        got = await until(events_count(c, a, sid, 2), 5, step=0.05, what="the 'Stopped.' message")
        assert [(e["event"]["role"], e["event"]["content"]) for e in got["events"]][1:] == [
            ("assistant", "Stopped.")]
        fake.default = Script(chunks=["ok"])
        await send(c, a, sid, "again")
        got = await until(events_count(c, a, sid, 4), 5, step=0.05, what="4 events")
        assert got["events"][-1]["event"]["content"] == "ok"
        await c.close()


async def test_messages_to_one_session_are_answered_in_order(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    r = await c.call(a, {"_": "CreateAgent", "definition": {
        "name": "E", "systemPrompt": "", "modelProvider": "echo", "model": "x"}})
    sid = (await c.call(a, {"_": "CreateSession", "agentId": r["agentId"]}))["sessionId"]
    await asyncio.gather(*(send(c, a, sid, f"m{i}", clientMessageId=f"id{i}") for i in range(5)))
    await session_status(c, a, sid, "idle")
    got = await until(events_count(c, a, sid, 10), 2.5, step=0.05, what="10 events")
    users = [e for e in got["events"] if e["event"]["role"] == "user"]
    replies = [e["event"]["content"] for e in got["events"] if e["event"]["role"] == "assistant"]
    assert replies == ["echo: " + u["event"]["content"] for u in users]
    # each reply comes after its own user message
    for u in users:
        reply_seq = next(e["seq"] for e in got["events"] if e["event"].get("content") == "echo: " + u["event"]["content"])
        assert reply_seq > u["seq"]
    await c.close()


async def test_two_sessions_answer_concurrently(server):
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30, chunks=["slow"])) as fake:
        c = await V2Client.open(server.url)
        _, sid1 = await provider_session(c, a, fake)
        agent_id = (await c.call(a, {"_": "ListAgents"}))["agents"][0]["id"]
        sid2 = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await send(c, a, sid1, "one")
        await send(c, a, sid2, "two")
        # Both requests reach the provider while neither has had its first token: concurrent.
        await fake.wait_for_requests(2, timeout=10)
        for sid in (sid1, sid2):
            assert len((await c.call(a, {"_": "GetSession", "sessionId": sid}))["events"]) == 1
            await c.call(a, {"_": "StopSession", "sessionId": sid})
        await session_status(c, a, sid1, "idle")
        await session_status(c, a, sid2, "idle")
        await c.close()

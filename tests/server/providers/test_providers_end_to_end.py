"""Anthropic and Gemini turns through a real server: SetSecret + SetModelProvider pointing at a
fake provider on 127.0.0.1 (the test server's operator allows base URL overrides), streamed
partials, the durable reply, usage, failures as error events, ListProviderModels, the network
policy, and no API key in any frame or log line."""
from __future__ import annotations

import asyncio
import logging

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.server.main import start_server

from tests.conftest import make_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.sse_base import Script
from tests.procs import free_port
from tests.waiting import until
from tests.wsraw import V2Client, flatten, keypair

KEY = "sk-e2e-NEVER-SHOWN-\"quoted\"-\\back-3b9f"   # quotes and a backslash: escaped forms
FIRST_TOKEN = 0.5


class RecordingClient(V2Client):
    """A v2 client that also keeps every frame the server sent, to look for the key in."""

    async def _read(self):
        self.frames: list[bytes] = []
        try:
            async for frame in self.ws:
                self.frames.append(frame)
                value = dagcbor.decode(frame, max_size=1 << 30, max_depth=256)
                if "id" in value and "response" in value:
                    fut = self.responses.pop(value["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(value["response"])
                else:
                    await self.events.put(value)
        except Exception:  # noqa: BLE001 - the socket closed
            pass


async def started(tmp_path, **settings):
    config = make_config(tmp_path, allow_provider_base_url=True,
                         provider_first_token_timeout=FIRST_TOKEN, **settings)
    return await start_server(config)


@pytest.fixture
async def server(tmp_path):
    running = await started(tmp_path)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


async def configure(c, kp, type_, base_url, *, name="p"):
    r = await c.call(kp, {"_": "SetSecret", "name": "k", "value": KEY.encode()})
    assert r["_"] == "SetSecretResponse"
    provider = {"type": type_, "baseUrl": base_url, "secretRefs": {"apiKey": "k"}}
    r = await c.call(kp, {"_": "SetModelProvider", "name": name, "provider": provider})
    assert r["_"] == "SetModelProviderResponse", r


async def session_for(c, kp, provider="p", model="m"):
    r = await c.call(kp, {"_": "CreateAgent", "definition": {
        "name": "A", "systemPrompt": "Be brief.", "modelProvider": provider, "model": model}})
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": r["agentId"]}))["sessionId"]
    await c.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
    return r["agentId"], sid


async def turn(c, kp, sid, text="hello"):
    """Send a message; return (partial patches, the durable reply or error event)."""
    r = await c.call(kp, {"_": "MessageSession", "sessionId": sid,
                          "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    patches = []
    async with asyncio.timeout(20):
        while True:
            e = await c.event()
            if e["_"] == "appendPartial":
                patches.append(e["patch"])
            for append in flatten(e):
                if append["event"].get("role") != "user":
                    return patches, append["event"]


async def settled_status(c, kp, sid):
    async def settled():
        s = (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["session"]["status"]
        return s if s != "streaming" else None
    return await until(settled, 10)


@pytest.mark.parametrize("fake_cls, type_, usage", [
    (FakeAnthropic, "anthropic", {"input": 11, "output": 5, "cacheRead": 7, "cacheWrite": 3,
                                  "total": 26}),
    (FakeGoogle, "google", {"input": 10, "output": 10, "cacheRead": 2, "cacheWrite": 0,
                            "total": 22}),
])
async def test_a_streamed_turn_and_its_failures(server, logs, fake_cls, type_, usage):
    kp = keypair("A")
    async with fake_cls(Script(chunks=["Hel", "lo ", "wörld"]), key=KEY) as fake:
        c = await RecordingClient.open(server.url)
        await configure(c, kp, type_, fake.base_url)
        _, sid = await session_for(c, kp)
        await c.event(); await c.event()   # change, replayed

        patches, reply = await turn(c, kp, sid)
        deltas = [p["textDelta"] for p in patches if "textDelta" in p]
        assert deltas == ["Hel", "lo ", "wörld"]
        assert reply["content"] == "".join(deltas) == "Hello wörld"
        assert patches[-1]["done"] is True and patches[-1]["usage"] == usage
        assert reply["meta"]["usage"] == usage and reply["meta"]["provider"] == type_
        assert await settled_status(c, kp, sid) == "idle"

        # A failure mid-stream: the error event has a fixed phrase (the remote text, which
        # here even carries the key, goes to the log only, scrubbed), and the run failed.
        fake.enqueue(Script(chunks=["a", "b"], error_after=1, error_message=f"boom {KEY}"))
        patches, error = await turn(c, kp, sid)
        assert error["type"] == "error" and "boom" not in error["message"]
        # The provider is named by its type; its URL is in the log only (readers see this event).
        assert error["message"].startswith(f"provider {type_}: HTTP") and fake.base_url not in error["message"]
        assert patches[-1] == {"done": True}
        assert await settled_status(c, kp, sid) == "error"   # its latest run failed

        fake.enqueue(Script(status=429, error_message=f"slow down {KEY}"))
        _, error = await turn(c, kp, sid)
        assert error["message"].endswith("HTTP 429 (rate limited by the provider)")

        # A stall past the configured first-token timeout (Config.provider_first_token_timeout).
        fake.enqueue(Script(first_delay=30))
        _, error = await turn(c, kp, sid)
        assert error["message"].endswith(f"no first token within {FIRST_TOKEN:g} s")

        # And the next turn works again.
        _, reply = await turn(c, kp, sid)
        assert reply["content"] == "Hello wörld"

        models = await c.call(kp, {"_": "ListProviderModels", "provider": "p"})
        assert models["_"] == "ListProviderModelsResponse" and len(models["models"]) == 2 + (type_ == "anthropic")
        await c.close()

    # No form of the key in any frame the client received, nor in any log line.
    frames = b"".join(c.frames)
    assert c.frames and KEY.encode() not in frames and b"NEVER-SHOWN" not in frames
    assert "boom" in logs.text   # the remote text was logged ...
    assert "NEVER-SHOWN" not in logs.text   # ... without the key
    assert all(KEY not in r.getMessage() for r in logs.records)


async def test_list_provider_models_for_each_type(server):
    kp = keypair("L")
    c = await V2Client.open(server.url)
    r = await c.call(kp, {"_": "ListProviderModels", "provider": "echo"})
    assert r == {"_": "ListProviderModelsResponse", "models": [{"id": "echo", "name": "echo"}]}
    async with FakeOpenAI() as oai, FakeAnthropic(key=KEY) as ant, FakeGoogle(key=KEY) as goo:
        await configure(c, kp, "custom", oai.base_url, name="local")
        await configure(c, kp, "openai", oai.base_url, name="oai")
        await configure(c, kp, "anthropic", ant.base_url, name="claude")
        await configure(c, kp, "google", goo.base_url, name="gemini")
        for name in ("local", "oai"):
            r = await c.call(kp, {"_": "ListProviderModels", "provider": name})
            assert r["models"] == [{"id": "fake-model", "name": "fake-model"}]
        r = await c.call(kp, {"_": "ListProviderModels", "provider": "claude"})
        assert r["models"][0] == {"id": "claude-sonnet-4-5", "name": "Claude Sonnet 4.5"}
        assert len(r["models"]) == 3
        r = await c.call(kp, {"_": "ListProviderModels", "provider": "gemini"})
        assert [m["id"] for m in r["models"]] == ["gemini-2.5-flash", "gemini-2.5-pro"]
        assert oai.requests[-1].headers["authorization"] == f"Bearer {KEY}"

        # With agentId: that agent's owner's providers; another account's agent is 404.
        agent_id, _ = await session_for(c, kp, provider="claude")
        r = await c.call(kp, {"_": "ListProviderModels", "provider": "claude", "agentId": agent_id})
        assert len(r["models"]) == 3
        c2 = await V2Client.open(server.url)   # a socket speaks for one account
        other = await c2.call(keypair("M"), {"_": "ListProviderModels", "provider": "claude",
                                             "agentId": agent_id})
        assert other["_"] == "Error" and other["status"] == 404
        await c2.close()

    r = await c.call(kp, {"_": "ListProviderModels", "provider": "nope"})
    assert r["_"] == "Error" and r["status"] == 404
    # The fakes are gone: unreachable is 502 with a clear message, never a traceback.
    r = await c.call(kp, {"_": "ListProviderModels", "provider": "claude"})
    assert r["_"] == "Error" and r["status"] == 502
    assert "refused the connection" in r["message"] and "Traceback" not in r["message"]
    assert KEY not in r["message"]
    r = await c.call(kp, {"_": "ListProviderModels", "provider": "x" * 300})
    assert r["status"] == 400
    await c.close()


async def test_an_exposed_server_refuses_loopback_providers(tmp_path, logs):
    # Listening beyond loopback is what the default policy keys on; the test cannot listen
    # elsewhere, so it sets the policy an exposed server gets by default: `public`.
    running = await started(tmp_path, provider_networks="public")
    kp = keypair("S")
    try:
        async with FakeOpenAI() as fake:
            c = await V2Client.open(running.url)
            await configure(c, kp, "custom", fake.base_url)
            r = await c.call(kp, {"_": "ListProviderModels", "provider": "p"})
            assert r["status"] == 502 and "outside the networks" in r["message"]
            _, sid = await session_for(c, kp)
            await c.event(); await c.event()
            _, error = await turn(c, kp, sid)
            assert error["type"] == "error" and "--provider-networks" in error["message"]
            assert fake.connections == 0   # nothing ever reached the internal address
            assert "refused by the network policy: 127.0.0.1 resolves only to" in logs.text
            await c.close()
    finally:
        await running.stop()


async def test_unreachable_port_is_502(server):
    kp = keypair("U")
    c = await V2Client.open(server.url)
    await configure(c, kp, "ollama", f"http://127.0.0.1:{free_port()}/v1")
    r = await c.call(kp, {"_": "ListProviderModels", "provider": "p"})
    assert r["_"] == "Error" and r["status"] == 502
    assert r["message"].startswith("could not list models: provider ollama: ") and "127.0.0.1" not in r["message"]
    await c.close()

"""Session titles from a small model call (server/runtime/titling.py), over a real server with a
scripted model: a session still titled from its first line is named by the agent's model after
its turn (title, description, a `change` of the session), once; a title the user typed, or the
agent's own from `status`, is never overwritten; an answer that is too long or instructs is cut
to one bounded line; the echo provider is never asked."""
from __future__ import annotations

import pytest

from seed_agents.server.main import start_server
from seed_agents.server.runtime import titling
from tests.conftest import server_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")


@pytest.fixture
async def server(tmp_path, storage, request):
    running = await start_server(server_config(tmp_path, storage, request, allow_provider_base_url=True,
                                               session_title_generation=True))
    try:
        yield running
    finally:
        await running.stop()


def is_titling(request) -> bool:
    messages = (request.body or {}).get("messages") or []
    return bool(messages) and messages[0].get("content") == titling.INSTRUCTIONS


def model(request) -> Script:
    if is_titling(request):
        digest = request.body["messages"][1]["content"]
        if "long please" in digest:
            return Script(chunks=["Title: \"" + "word " * 60 + ".\"\n", "x" * 5000])
        return Script(chunks=["\"Kite tails explained.\"\n", "A talk about why kites have forked tails."])
    if "name yourself" in str(request.body["messages"]):
        if not any(m.get("role") == "tool" for m in request.body["messages"]):
            return Script(chunks=[], tool_calls=[call("s1", "status", {"title": "Chosen by the agent"})])
    return Script(chunks=["noted"])


async def test_a_provisional_title_is_named_once_and_a_typed_one_never(server):
    kp = keypair("titles")
    async with FakeOpenAI(model) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)

        async def session(session_id: str) -> dict:
            return (await c.call(kp, {"_": "GetSession", "sessionId": session_id}))["session"]

        async def send(session_id: str, text: str) -> None:
            r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                                  "content": [{"type": "text", "text": text}]})
            assert r["_"] == "MessageSessionResponse", r

        await send(sid, "why do kites have forked tails?\nmore detail here")
        got = await until(lambda: _titled(session, sid, "Kite tails explained"), timeout=30)
        assert got["description"] == "A talk about why kites have forked tails."
        change = await c.event_where(lambda e: e.get("_") == "change" and e.get("key") == f"sessions/{sid}"
                                     and e["value"].get("title") == "Kite tails explained", timeout=10)
        assert change["value"]["id"] == sid
        [asked] = [r for r in fake.requests if is_titling(r)]
        assert "User: why do kites have forked tails?" in asked.body["messages"][1]["content"]
        assert "tools" not in asked.body or not asked.body["tools"]
        # named once: a later turn asks no more
        await send(sid, "thanks")
        await until(lambda: _idle_after(session, sid, fake, 2), timeout=30)
        assert sum(is_titling(r) for r in fake.requests) == 1

        # a title the user typed stays
        typed = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        r = await c.call(kp, {"_": "UpdateSession", "sessionId": typed, "title": "My own title"})
        assert r["_"] == "UpdateSessionResponse", r
        await send(typed, "kites again")
        await until(lambda: _idle_after(session, typed, fake, 1), timeout=30)
        # the agent's own name (status) stays too
        named = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await send(named, "name yourself")
        await until(lambda: _idle_after(session, named, fake, 1), timeout=30)
        # a long answer becomes one bounded line
        long = (await c.call(kp, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await send(long, "long please")
        got = await until(lambda: _titled(session, long, None), timeout=30)
        assert len(got["title"]) <= titling.MAX_TITLE and got["title"].startswith("word word")
        assert "\n" not in got["title"] and len(got.get("description", "")) <= titling.MAX_DESCRIPTION
        assert (await session(typed))["title"] == "My own title"
        assert (await session(named))["title"] == "Chosen by the agent"
        digests = [r.body["messages"][1]["content"] for r in fake.requests if is_titling(r)]
        assert len(digests) == 2 and not any("kites again" in d or "name yourself" in d for d in digests)
        await c.close()


async def _titled(session, session_id: str, title: str | None):
    got = await session(session_id)
    if title is None:
        return got if got.get("title", "").startswith("word") else None
    return got if got.get("title") == title else None


async def _idle_after(session, session_id: str, fake, replies: int):
    got = await session(session_id)
    return got["status"] == "idle" and got


async def test_the_echo_provider_is_never_asked_for_a_title(server):
    kp = keypair("titles-echo")
    c = await V2Client.open(server.url)
    agent = await c.call(kp, {"_": "CreateAgent", "definition": {"name": "e", "systemPrompt": "",
                                                                "modelProvider": "echo", "model": "echo"}})
    sid = (await c.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]}))["sessionId"]
    await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "first line\nrest"}]})

    async def titled():
        got = (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["session"]
        return got.get("title") and got["status"] == "idle" and got
    got = await until(titled, timeout=30)
    assert got["title"] == "first line" and server.app.runtime.titler.attempts == {}
    await c.close()

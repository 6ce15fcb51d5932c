"""The shapes of CONTRACT section 4 over real sockets: AgentInfo (accessRole, publicRead, busy,
activity), SessionInfo.activity, RedactedModelProvider and RedactedSecret, a block-tree system
prompt (stored as given, Markdown for the model and for systemPromptMarkdown), and text parts
whose blocks stay on the user event."""
from __future__ import annotations

import asyncio
import re

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.waiting import until
from tests.wsraw import V1, V2Client, flatten, keypair, setup_session
from tests.model_view import without_preamble

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
API_KEY = "sk-shapes-NEVER-SHOWN-91c2"

PROMPT_BLOCKS = [
    {"block": {"id": "h1", "type": "Heading", "text": "Role", "annotations": []},
     "children": [
         {"block": {"id": "p1", "type": "Paragraph", "text": "You review prose."}},
         {"block": {"id": "p2", "type": "Paragraph", "text": "Rules:", "attributes": {"childrenType": "Unordered"}},
          "children": [{"block": {"id": "l1", "type": "Paragraph", "text": "be kind"}},
                       {"block": {"id": "l2", "type": "Paragraph", "text": "be brief"}}]},
     ]},
    {"block": {"id": "c1", "type": "Code", "text": "print(1)", "attributes": {"language": "python"}}},
]
PROMPT_MARKDOWN = "# Role\n\nYou review prose.\n\nRules:\n\n- be kind\n- be brief\n\n```python\nprint(1)\n```"


async def wait_for(c, predicate, timeout=20) -> list:
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            e = await c.event(timeout)
            seen.append(e)
            if predicate(e):
                return seen


async def settled_agent(c, kp, agent_id) -> dict:
    """The AgentInfo once no run of the agent is live (waits on the condition)."""
    async def settled() -> dict | None:
        agent = (await c.call(kp, {"_": "GetAgent", "agentId": agent_id}))["agent"]
        return agent if not agent["busy"] and agent["status"] != "running" else None

    return await until(settled, 20, what="the agent settled")


async def test_agent_and_session_info_carry_role_busy_and_activity(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    fresh = (await c.call(a, {"_": "GetAgent", "agentId": agent_id}))["agent"]
    assert {k: fresh[k] for k in ("accessRole", "publicRead", "busy")} == {
        "accessRole": "owner", "publicRead": False, "busy": False}
    assert "activity" not in fresh   # nothing happened in any session yet
    assert set(fresh) == {"id", "account", "definition", "stateDir", "status", "createdAt", "updatedAt",
                          "accessRole", "publicRead", "busy"}
    got = await c.call(a, {"_": "GetSession", "sessionId": session_id})
    assert "activity" not in got["session"]

    await c.call(a, {"_": "Subscribe", "key": f"sessions/{session_id}"})
    await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "hi"}]})
    seen = await wait_for(c, lambda e: any(x["event"].get("role") == "assistant" for x in flatten(e)))
    user, reply = [x for e in seen for x in flatten(e)]
    agent = await settled_agent(c, a, agent_id)
    assert agent["activity"] == {"at": reply["createdAt"], "kind": "message", "sessionId": session_id,
                                 "messageAt": reply["createdAt"], "messageFrom": "assistant"}
    [listed] = (await c.call(a, {"_": "ListAgents"}))["agents"]
    assert listed["activity"] == agent["activity"] and listed["busy"] is False
    session = (await c.call(a, {"_": "GetSession", "sessionId": session_id}))["session"]
    assert session["activity"] == {"messageAt": reply["createdAt"], "messageFrom": "assistant"}
    page = await c.call(a, {"_": "ListSessions"})
    assert page["sessions"][0]["activity"] == session["activity"]
    assert page["agents"][0]["activity"] == agent["activity"]
    # the user's message moved the marks first: the session change published with it says so
    changes = [e["value"] for e in seen if e["_"] == "change" and e["key"] == f"sessions/{session_id}"]
    assert {"messageAt": user["createdAt"], "messageFrom": "user"} in [ch.get("activity") for ch in changes]
    await c.close()


async def test_an_error_event_moves_at_and_kind_but_not_the_message_marks(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    # A provider nobody can reach: the turn ends with a durable error event.
    await c.call(a, {"_": "SetModelProvider", "name": "down", "provider": {
        "type": "custom", "baseUrl": "http://127.0.0.1:9/v1"}})
    agent_id = (await c.call(a, {"_": "CreateAgent", "definition": {
        "name": "Down", "systemPrompt": "", "modelProvider": "down", "model": "m"}}))["agentId"]
    session_id = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    await c.call(a, {"_": "Subscribe", "key": f"sessions/{session_id}"})
    await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "hi"}]})
    seen = await wait_for(c, lambda e: any(x["event"].get("type") == "error" for x in flatten(e)))
    user, error = [x for e in seen for x in flatten(e)]
    agent = await settled_agent(c, a, agent_id)
    assert agent["status"] == "error"
    assert agent["activity"] == {"at": error["createdAt"], "kind": "error", "sessionId": session_id,
                                 "messageAt": user["createdAt"], "messageFrom": "user"}
    session = (await c.call(a, {"_": "GetSession", "sessionId": session_id}))["session"]
    assert session["activity"] == {"messageAt": user["createdAt"], "messageFrom": "user"}
    await c.close()


async def test_busy_is_true_while_a_run_is_queued_or_running(server):
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30)) as fake:   # a turn that waits until stopped
        c = await V2Client.open(server.url)
        await c.call(a, {"_": "SetModelProvider", "name": "slow", "provider": {
            "type": "custom", "baseUrl": fake.base_url}})
        agent_id = (await c.call(a, {"_": "CreateAgent", "definition": {
            "name": "Slow", "systemPrompt": "", "modelProvider": "slow", "model": "m"}}))["agentId"]
        session_id = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await c.call(a, {"_": "Subscribe", "key": f"agents/{agent_id}"})
        await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "go"}]})
        await fake.wait_for_requests(1)   # the run is running, waiting for its first token
        # busy holds from the queued run on; status 'running' is written by the turn's start,
        # which commits without the turn waiting for it: wait for that commit (bounded).
        async def running() -> bool:
            agent = (await c.call(a, {"_": "GetAgent", "agentId": agent_id}))["agent"]
            assert agent["busy"] is True
            return agent["status"] == "running"

        await until(running, 10, step=0.01, what="the agent running")
        assert (await c.call(a, {"_": "ListAgents"}))["agents"][0]["busy"] is True
        # the agents/<id> stream said so too: a change with busy, carrying the user's activity
        seen = await wait_for(c, lambda e: e["_"] == "change" and e["key"] == f"agents/{agent_id}"
                              and e["value"]["busy"] and "activity" in e["value"])
        assert seen[-1]["value"]["activity"]["messageFrom"] == "user"
        await c.call(a, {"_": "StopSession", "sessionId": session_id})
        agent = await settled_agent(c, a, agent_id)
        assert agent["busy"] is False
        await c.close()


async def test_redacted_secret_and_provider_shapes_never_show_the_key(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    account_events = []
    await c.call(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})

    r = await c.call(a, {"_": "SetSecret", "name": "work-key", "value": API_KEY.encode(),
                         "metadata": {"label": "work"}})
    secret = r["secret"]
    assert r["_"] == "SetSecretResponse" and list(r) == ["_", "secret"]
    assert secret == {"id": secret["id"], "name": "work-key", "metadata": {"label": "work"}, "hasValue": True,
                      "createdAt": secret["createdAt"], "updatedAt": secret["updatedAt"]}
    assert UUID4.fullmatch(secret["id"])
    again = (await c.call(a, {"_": "SetSecret", "name": "work-key", "value": b"rotated"}))["secret"]
    assert again["id"] == secret["id"] and "metadata" not in again and again["createdAt"] == secret["createdAt"]

    provider = {"type": "openai", "baseUrl": "https://api.example.invalid/v1",
                "secretRefs": {"apiKey": "work-key"}, "modelDefaults": {"temperature": 0.5}}
    r = await c.call(a, {"_": "SetModelProvider", "name": "work", "provider": provider})
    redacted = r["provider"]
    assert r["_"] == "SetModelProviderResponse" and list(r) == ["_", "provider"]
    assert redacted == {"id": redacted["id"], "name": "work", "type": "openai", "hasSecrets": True,
                        "createdAt": redacted["createdAt"], "updatedAt": redacted["updatedAt"]}
    assert UUID4.fullmatch(redacted["id"])
    await c.call(a, {"_": "SetModelProvider", "name": "local", "provider": {"type": "ollama"}})
    replaced = (await c.call(a, {"_": "SetModelProvider", "name": "work", "provider": provider}))["provider"]
    assert replaced["id"] == redacted["id"]

    listed = await c.call(a, {"_": "ListModelProviders"})
    assert [p["name"] for p in listed["providers"]] == ["echo", "local", "work"]
    echo, local, work = listed["providers"]
    assert echo["type"] == "echo" and echo["hasSecrets"] is False and UUID4.fullmatch(echo["id"])
    assert local["hasSecrets"] is False and work == replaced
    assert (await c.call(a, {"_": "ListModelProviders"}))["providers"][0]["id"] == echo["id"]   # stable

    agent_id, _ = await setup_session(c, a)
    assert await c.call(a, {"_": "ListModelProviders", "agentId": agent_id}) == listed
    async with asyncio.timeout(10):
        while not any(e["_"] == "change" and e["value"].get("reason") == "session-created" for e in account_events):
            account_events.append(await c.event())
    reasons = [e["value"]["reason"] for e in account_events if e["key"] == f"account/{a.account_id}"]
    assert reasons[:3] == ["model-provider-changed"] * 3

    # An account that defines its own "echo" sees it instead of the built-in one.
    await c.call(a, {"_": "SetModelProvider", "name": "echo", "provider": {"type": "echo"}})
    names = [p["name"] for p in (await c.call(a, {"_": "ListModelProviders"}))["providers"]]
    assert names == ["echo", "local", "work"]
    everything = repr([secret, again, redacted, replaced, listed, account_events])
    for hidden in (API_KEY, "rotated", "api.example.invalid", "temperature"):
        assert hidden not in everything
    assert "work-key" not in repr([redacted, replaced, listed])   # secret names stay server-side
    await c.close()

    # Another account's agent is not found (404), never listed.
    d = await V2Client.open(server.url)
    r = await d.call(b, {"_": "ListModelProviders", "agentId": agent_id})
    assert r["_"] == "Error" and r["status"] == 404
    await d.close()


async def test_block_system_prompt_round_trip_and_the_model_sees_markdown(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["ok"])) as fake:
        c = await V2Client.open(server.url)
        await c.call(a, {"_": "SetModelProvider", "name": "fake", "provider": {
            "type": "custom", "baseUrl": fake.base_url}})
        r = await c.call(a, {"_": "CreateAgent", "definition": {
            "name": "Reviewer", "systemPrompt": PROMPT_BLOCKS, "modelProvider": "fake", "model": "m"}})
        agent_id = r["agentId"]
        agent = (await c.call(a, {"_": "GetAgent", "agentId": agent_id}))["agent"]
        assert agent["definition"]["systemPrompt"] == PROMPT_BLOCKS   # the tree comes back as sent
        session_id = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        got = await c.call(a, {"_": "GetSession", "sessionId": session_id})
        assert got["systemPromptMarkdown"] == PROMPT_MARKDOWN

        message_blocks = [{"block": {"id": "m1", "type": "Paragraph", "text": "Look at this",
                                     "annotations": [{"type": "Bold", "starts": [0], "ends": [4]}]}}]
        await c.call(a, {"_": "Subscribe", "key": f"sessions/{session_id}"})
        await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [
            {"type": "text", "text": "Look at this", "blocks": message_blocks},
            {"type": "text", "text": "and this"}]})
        seen = await wait_for(c, lambda e: any(x["event"].get("role") == "assistant" for x in flatten(e)))
        user = [x for e in seen for x in flatten(e)][0]["event"]
        assert user["blocks"] == message_blocks and user["content"] == "Look at this\nand this"
        [request] = fake.requests
        assert without_preamble(request.body["messages"]) == [{"role": "system", "content": PROMPT_MARKDOWN},
                                            {"role": "user", "content": "Look at this\nand this"}]
        assert "m1" not in repr(request.body)   # blocks are for display, never for the model
        # v1 (JSON) readers get the same user event, blocks included
        v1 = await V1.open(server.url)
        assert (await v1.send(a, {"_": "Subscribe", "key": f"sessions/{session_id}"}))["_"] == "subscribed"
        assert (await v1.recv())["_"] == "change"
        assert (await v1.recv())["event"]["event"]["blocks"] == message_blocks
        await v1.close()
        await c.close()


async def test_malformed_block_prompt_is_a_400_naming_the_field(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    bad = [{"block": {"id": "x", "type": "Paragraph"}, "children": [{"block": {"id": "y"}}]}]
    r = await c.call(a, {"_": "CreateAgent", "definition": {
        "name": "Bad", "systemPrompt": bad, "modelProvider": "echo", "model": "m"}})
    assert r["_"] == "Error" and r["status"] == 400
    assert "CreateAgent.definition.systemPrompt[0].children[0].block.type" in r["message"]
    assert (await c.call(a, {"_": "ListAgents"}))["agents"] == []   # nothing half-made
    await c.close()

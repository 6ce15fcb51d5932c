"""AgentsClient against a real server: every action round-trips, errors carry their status,
concurrent calls are answered once each, and subscriptions replay then go live."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.keys import Keypair

from tests.procs import free_port
from tests.waiting import until

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")

ECHO = {"name": "helper", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo"}


async def appends_until(sub, last_seq: int, timeout: float = 10.0) -> list[dict]:
    """Every item up to and including the append with seq `last_seq`."""
    items = []
    async with asyncio.timeout(timeout):
        async for item in sub:
            items.append(item)
            if item["_"] == "append" and item["event"]["seq"] >= last_seq:
                return items
    raise AssertionError(f"subscription ended early: {items}")


def seqs(items):
    return [i["event"]["seq"] for i in items if i["_"] == "append"]


async def test_every_action_round_trips(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        request_id = str(uuid.uuid4())
        created = await client.create_agent(ECHO, client_request_id=request_id)
        agent_id = created["agentId"]
        assert created["_"] == "CreateAgentResponse"
        assert await client.create_agent(ECHO, client_request_id=request_id) == created  # idempotent
        got = await client.get_agent(agent_id)
        assert got["agent"]["definition"]["name"] == "helper" and got["sessions"] == []
        assert [a["id"] for a in (await client.list_agents())["agents"]] == [agent_id]

        session_id = (await client.create_session(agent_id, title="first"))["sessionId"]
        listed = await client.list_sessions(agent_id=agent_id, limit=10)
        assert [s["id"] for s in listed["sessions"]] == [session_id]
        assert listed["sessions"][0]["title"] == "first"

        secret = (await client.set_secret("openai-key", b"sk-test", {"note": "test"}))["secret"]
        assert secret["name"] == "openai-key" and secret["metadata"] == {"note": "test"}
        provider = {"type": "openai", "secretRefs": {"apiKey": "openai-key"}}
        assert (await client.set_model_provider("work", provider))["provider"]["hasSecrets"] is True
        providers = (await client.list_model_providers())["providers"]
        assert "sk-test" not in repr(providers) and "work" in repr(providers)

        sent = await client.message_session(session_id, "hello there", client_message_id="m-1")
        assert set(sent) >= {"sessionId", "assistantEventId", "userEventId", "runId"}
        assert await client.message_session(session_id, "hello there", client_message_id="m-1") == sent
        user, reply = await settled_events(client, session_id, 2)
        assert user["id"] == sent["userEventId"] and user["event"]["content"] == "hello there"
        assert reply["event"]["content"] == "echo: hello there"
        page = await client.get_session(session_id, after_seq=0, limit=1)
        assert [e["seq"] for e in page["events"]] == [1] and page["nextAfterSeq"] == 1

        assert (await client.stop_session(session_id))["sessionId"] == session_id
        assert (await client.call({"_": "ListAgents"}))["_"] == "ListAgentsResponse"


async def settled_events(client, session_id, count):
    async def events():
        got = (await client.get_session(session_id))["events"]
        return got if len(got) >= count else None
    return await until(events, 10, what=f"{count} events")


async def test_context_lines_reach_the_model_but_not_the_content(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent(ECHO))["agentId"]
        session_id = (await client.create_session(agent_id))["sessionId"]
        await client.message_session(session_id, "hello there", context_lines=["ctx"])
        user, reply = await settled_events(client, session_id, 2)
        assert user["event"]["content"] == "hello there" and user["event"]["contextLines"] == ["ctx"]
        # CONTRACT: echo replies with exactly "echo: " + the user event's content.
        assert reply["event"]["content"] == "echo: hello there"


async def test_errors_raise_agents_error_with_the_contract_status(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        with pytest.raises(AgentsError) as missing:
            await client.get_agent(str(uuid.uuid4()))
        assert missing.value.status == 404 and "not found" in missing.value.message
        with pytest.raises(AgentsError) as refused:
            await client.set_model_provider("claude", {"type": "bedrock"})
        assert refused.value.status == 400
        with pytest.raises(AgentsError) as unknown:
            await client.call({"_": "NoSuchAction"})
        assert unknown.value.status == 400
        # the connection is still usable after errors
        assert (await client.list_agents())["agents"] == []


async def test_another_accounts_resource_is_404(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as alice, \
            AgentsClient.connect(server.url, Keypair.generate()) as bob:
        agent_id = (await alice.create_agent(ECHO))["agentId"]
        with pytest.raises(AgentsError) as err:
            await bob.get_agent(agent_id)
        assert err.value.status == 404


async def test_concurrent_calls_are_each_answered_once(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent(ECHO))["agentId"]
        # Identical reads in the same millisecond still get distinct envelopes (ts moves on).
        reads = [client.get_agent(agent_id) for _ in range(20)]
        writes = [client.create_session(agent_id, title=f"s{i}") for i in range(40)]
        results = await asyncio.gather(*reads, *writes)
        assert all(r["agent"]["id"] == agent_id for r in results[:20])
        session_ids = [r["sessionId"] for r in results[20:]]
        assert len(set(session_ids)) == 40
        listed = await client.list_sessions(agent_id=agent_id, limit=100)
        assert sorted(s["id"] for s in listed["sessions"]) == sorted(session_ids)


async def test_unreachable_server_is_status_0_naming_the_url():
    url = f"ws://127.0.0.1:{free_port()}/agents/ws"
    with pytest.raises(AgentsError) as err:
        await AgentsClient.connect(url, Keypair.generate(), connect_timeout=2)
    assert err.value.status == 0 and err.value.reason == "unreachable"
    assert url in err.value.message


async def test_subscription_replays_then_streams_live(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent(ECHO))["agentId"]
        session_id = (await client.create_session(agent_id))["sessionId"]
        key = f"sessions/{session_id}"
        async with await client.subscribe(key) as warmup:
            await client.message_session(session_id, "one")
            await appends_until(warmup, 2)

        sub = await client.subscribe(key)  # no afterSeq: replay from the start
        replay = await appends_until(sub, 2)
        assert replay[0]["_"] == "change" and replay[0]["value"]["id"] == session_id
        assert seqs(replay) == [1, 2]
        marker = await sub.next(5)
        # The marker carries the session's signed head at that seq (docs/protocol.md, "Verifiable history").
        assert {k: marker[k] for k in ("_", "key", "seq")} == {"_": "replayed", "key": key, "seq": 2}
        assert marker["head"]["seq"] == 2 and marker["head"]["sessionId"] == session_id and sub.replayed_seq == 2

        await client.message_session(session_id, "two words")
        live = await appends_until(sub, 4)
        assert seqs(live) == [3, 4]
        deltas = [i["patch"].get("textDelta", "") for i in live if i["_"] == "appendPartial"]
        assert len(deltas) >= 3 and "".join(deltas) == "echo: two words"
        assert live[-1]["event"]["event"]["content"] == "echo: two words"
        assert sub.delivered_seq == 4

        with pytest.raises(AgentsError) as twice:
            await client.subscribe(key)
        assert twice.value.status == 409
        await sub.close()
        assert [i async for i in sub] == []
        resumed = await client.subscribe(key, after_seq=3)  # the key is free again
        assert seqs(await appends_until(resumed, 4)) == [4]


async def test_subscribe_to_a_missing_session_is_404(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        with pytest.raises(AgentsError) as err:
            await client.subscribe(f"sessions/{uuid.uuid4()}")
        assert err.value.status == 404
        await client.subscribe(f"account/{client.account_id}")  # the key was released


async def test_delegated_signer_registers_and_acts_for_the_account(server):
    capability = pytest.importorskip("seed_agents.protocol.wire.capability")
    owner, device = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.url, device, account=owner.principal) as client:
        with pytest.raises(AgentsError) as denied:
            await client.list_agents()
        assert denied.value.status == 403 and "Signer is not authorized" in denied.value.message
        blob = capability.make_capability(owner, device.principal, "AGENT", _now_ms())
        registered = await client.register_signer(blob)
        assert registered["accountId"] == owner.account_id and registered["signerId"] == device.account_id
        agent_id = (await client.create_agent(ECHO))["agentId"]
    async with AgentsClient.connect(server.url, owner) as as_owner:
        assert (await as_owner.get_agent(agent_id))["agent"]["account"] == owner.account_id


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


async def test_account_and_agent_subscriptions_get_what_the_server_routes_to_them(server):
    """The server sends an event once per socket, through its most specific subscription, with
    the event's own key; the client hands each to the subscription it came for."""
    kp = Keypair.generate()
    async with AgentsClient.connect(server.url, kp) as client:
        agent_id = (await client.create_agent(ECHO))["agentId"]
        session_id = (await client.create_session(agent_id))["sessionId"]
        account = await client.subscribe(f"account/{kp.account_id}")
        agent = await client.subscribe(f"agents/{agent_id}")
        first = await agent.next(10)
        assert first["key"] == f"agents/{agent_id}" and first["value"]["busy"] is False
        await client.message_session(session_id, "hi")
        got_account = await appends_until(account, 2)
        assert seqs(got_account) == [1, 2]
        assert "".join(i["patch"].get("textDelta", "") for i in got_account if i["_"] == "appendPartial") == "echo: hi"
        got_agent = []
        async with asyncio.timeout(10):
            while not any(i["key"] == f"agents/{agent_id}" and i["value"].get("activity", {}).get("messageFrom")
                          == "assistant" for i in got_agent):
                got_agent.append(await agent.next(10))
        assert {i["key"] for i in got_agent} <= {f"agents/{agent_id}", f"sessions/{session_id}",
                                                 f"account/{kp.account_id}"}
        assert any(i["key"] == f"sessions/{session_id}" for i in got_agent)        # its session's change
        # notices keep their own key (account/...): this socket follows the account, so they come there
        assert any(i["_"] == "change" and i["value"].get("reason") == "session-event" for i in got_account)
        assert not [i for i in got_agent if i["key"] == f"account/{kp.account_id}"]
        # and what the agent subscription covers does not come twice through the account one
        assert not [i for i in got_account if i["_"] == "change" and i["key"] == f"agents/{agent_id}"]

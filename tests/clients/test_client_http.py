"""The Python client over HTTP (`AgentsClient.connect("http://HOST:PORT", keypair)`): every
action signed and POSTed, errors raised as AgentsError like over the WebSocket."""
from __future__ import annotations

import time
import uuid

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.capability import make_capability
from seed_agents.protocol.wire.keys import Keypair

from tests.procs import free_port
from tests.waiting import until

ECHO = {"name": "helper", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


def http_url(server) -> str:
    return f"http://{server.host}:{server.port}"


async def test_actions_round_trip_over_http(server):
    async with AgentsClient.connect(http_url(server), Keypair.generate()) as client:
        request_id = str(uuid.uuid4())
        created = await client.create_agent(ECHO, client_request_id=request_id)
        assert await client.create_agent(ECHO, client_request_id=request_id) == created   # idempotent
        agent_id = created["agentId"]
        assert [a["id"] for a in (await client.list_agents())["agents"]] == [agent_id]
        session_id = (await client.create_session(agent_id, title="over http"))["sessionId"]
        sent = await client.message_session(session_id, "hello over http", client_message_id="m-1")
        assert await client.message_session(session_id, "hello over http", client_message_id="m-1") == sent
        async def two_events():
            got = (await client.get_session(session_id))["events"]
            return got if len(got) >= 2 else None
        events = await until(two_events, 10)
        assert events[1]["event"]["content"] == "echo: hello over http"
        with pytest.raises(AgentsError) as err:
            await client.get_session(str(uuid.uuid4()))
        assert err.value.status == 404
        with pytest.raises(AgentsError) as err:
            await client.subscribe(f"sessions/{session_id}")
        assert err.value.status == 400 and "WebSocket" in err.value.message


async def test_a_delegated_signer_registers_and_acts_over_http(server):
    account, device = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(http_url(server), device, account=account.principal) as client:
        with pytest.raises(AgentsError) as err:
            await client.list_agents()
        assert err.value.status == 403 and "Signer is not authorized" in err.value.message
        cap = make_capability(account, device.principal, "AGENT", int(time.time() * 1000))
        registered = await client.register_signer(cap)
        assert registered["accountId"] == client.account_id
        assert (await client.list_agents())["agents"] == []


async def test_an_unreachable_http_server_is_reported():
    with pytest.raises(AgentsError) as err:
        await AgentsClient.connect(f"http://127.0.0.1:{free_port()}", Keypair.generate(), connect_timeout=2)
    assert err.value.status == 0 and err.value.reason == "unreachable"

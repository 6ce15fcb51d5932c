"""AgentsClient's sharing methods against a real server: one call each, shapes as the contract
says, and a refusal raised as AgentsError with its status."""
from __future__ import annotations

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.protocol.wire.keys import Keypair

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")

ECHO = {"name": "shared", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo"}


async def test_sharing_methods_round_trip(server):
    owner_kp, guest_kp = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.url, owner_kp) as owner, \
            AgentsClient.connect(server.url, guest_kp) as guest:
        agent_id = (await owner.create_agent(ECHO))["agentId"]
        invited = await owner.invite_agent_collaborator(agent_id, guest_kp.account_id, "writer")
        assert invited["collaborator"]["status"] == "pending"
        invites = (await guest.list_agent_invites())["invites"]
        assert [(i["agentId"], i["agentName"], i["ownerAccountId"]) for i in invites] == [
            (agent_id, "shared", owner_kp.account_id)]
        accepted = await guest.accept_agent_invite(agent_id)
        assert accepted["agent"]["accessRole"] == "writer"
        listed = await guest.list_agent_collaborators(agent_id)
        assert [c["role"] for c in listed["collaborators"]] == ["owner", "writer"]
        public = await owner.set_agent_public_read(agent_id, True)
        assert public["agent"]["publicRead"] is True
        removed = await owner.remove_agent_collaborator(agent_id, guest_kp.account_id)
        assert removed["accountId"] == guest_kp.account_id
        assert (await guest.get_agent(agent_id))["agent"]["accessRole"] == "reader"   # public read
        await owner.set_agent_public_read(agent_id, False)
        with pytest.raises(AgentsError) as e:
            await guest.get_agent(agent_id)
        assert e.value.status == 404
        await owner.invite_agent_collaborator(agent_id, guest_kp.account_id, "reader")
        assert (await guest.decline_agent_invite(agent_id))["agentId"] == agent_id
        with pytest.raises(AgentsError) as e:
            await guest.accept_agent_invite(agent_id)
        assert e.value.status == 404


async def test_sharing_over_http(server):
    """The HTTP endpoint answers the sharing actions like any other (no subscriptions there)."""
    owner_kp, guest_kp = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.http_url, owner_kp) as owner, \
            AgentsClient.connect(server.http_url, guest_kp) as guest:
        agent_id = (await owner.create_agent(ECHO))["agentId"]
        await owner.invite_agent_collaborator(agent_id, guest_kp.account_id, "reader")
        assert [i["agentId"] for i in (await guest.list_agent_invites())["invites"]] == [agent_id]
        assert (await guest.accept_agent_invite(agent_id))["agent"]["accessRole"] == "reader"
        with pytest.raises(AgentsError) as e:
            await guest.create_session(agent_id)
        assert e.value.status == 403 and e.value.message == "Write access is required"


async def test_public_chat_methods(server):
    """An owner opens an echo agent to visitors; a visitor chats in its own session, within the
    hour's messages the owner allows (429 past them), and loses it when the owner closes."""
    owner_kp, visitor_kp = Keypair.generate(), Keypair.generate()
    async with AgentsClient.connect(server.url, owner_kp) as owner, \
            AgentsClient.connect(server.url, visitor_kp) as visitor:
        agent_id = (await owner.create_agent(ECHO))["agentId"]
        opened = await owner.set_agent_public_chat(agent_id, True, {"messagesPerHour": 1}, [])
        assert opened["agent"]["publicChat"]["messagesPerHour"] == 1
        assert (await visitor.get_agent(agent_id))["agent"]["accessRole"] == "visitor"
        session_id = (await visitor.create_session(agent_id))["sessionId"]
        await visitor.message_session(session_id, "hello")
        with pytest.raises(AgentsError) as e:
            await visitor.message_session(session_id, "again")
        assert e.value.status == 429
        await owner.set_agent_public_chat(agent_id, False)
        with pytest.raises(AgentsError) as e:
            await visitor.get_session(session_id)
        assert e.value.status == 404

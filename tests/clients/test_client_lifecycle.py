"""AgentsClient's lifecycle methods against a real server: each sends the action the server
expects and returns its response (UpdateSession's CLEAR sends modelOverride: null)."""
from __future__ import annotations

import pytest

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.clients.actions import CLEAR
from seed_agents.protocol.wire.keys import Keypair

from tests.waiting import until

ECHO = {"name": "helper", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo"}


async def test_lifecycle_methods_round_trip(server):
    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent(ECHO))["agentId"]
        updated = await client.update_agent(agent_id, {**ECHO, "name": "renamed"})
        assert updated["agent"]["definition"]["name"] == "renamed"
        sid = (await client.create_session(agent_id))["sessionId"]
        s = await client.update_session(sid, title="T", model_override={"provider": "echo", "model": "e2"})
        assert s["session"]["title"] == "T" and s["session"]["modelOverride"]["model"] == "e2"
        s = await client.update_session(sid, model_override=CLEAR)
        assert "modelOverride" not in s["session"] and s["session"]["title"] == "T"
        sent = await client.message_session(sid, "hi")
        async def succeeded():
            run = (await client.get_run(sent["runId"]))["run"]
            return run if run["status"] == "succeeded" else None
        run = await until(succeeded, 10)
        assert run["status"] == "succeeded"
        assert [r["id"] for r in (await client.list_runs(session_id=sid))["runs"]] == [sent["runId"]]
        assert [r["id"] for r in (await client.list_runs(root_run_id=sent["runId"]))["runs"]] == [sent["runId"]]
        assert (await client.cancel_run(sent["runId"]))["canceled"] is False
        assert (await client.stop_session(sid))["stopped"] is False
        with pytest.raises(AgentsError) as info:
            await client.retry_session(sid)
        assert info.value.status == 409
        with pytest.raises(AgentsError) as info:
            await client.list_runs(session_id=sid, agent_id=agent_id)
        assert info.value.status == 400
        sid2 = (await client.create_session(agent_id))["sessionId"]
        page = await client.list_sessions(agent_id=agent_id, limit=1)
        rest = await client.list_sessions(agent_id=agent_id, limit=1, cursor=page["nextCursor"])
        assert {page["sessions"][0]["id"], rest["sessions"][0]["id"]} == {sid, sid2}
        assert (await client.list_sessions(parent_session_id=sid))["sessions"] == []
        assert len((await client.list_sessions(include_children=False))["sessions"]) == 2
        assert await client.delete_session(sid2) == {"_": "DeleteSessionResponse", "sessionId": sid2,
                                                     "agentId": agent_id}
        await client.set_model_provider("p", {"type": "ollama"})
        assert (await client.delete_model_provider("p"))["name"] == "p"
        assert await client.delete_agent(agent_id) == {"_": "DeleteAgentResponse", "agentId": agent_id}
        assert (await client.list_agents())["agents"] == []

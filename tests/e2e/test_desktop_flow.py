"""What the Seed desktop does, in its order, over real sockets: HTTP for every action, the v1
WebSocket for Subscribe (CONTRACT section 3)."""
from __future__ import annotations

import time

import httpx
import pytest

from seed_agents.protocol.wire.capability import make_capability

from tests.httpraw import act, assert_cors, base_url
from tests.wsraw import V1, keypair

# The desktop's whole flow on the default store and on a shared PostgreSQL one.
pytestmark = pytest.mark.storages("sqlite", "postgresql")


async def read_until_assistant(v1: V1) -> list[dict]:
    got = []
    while True:
        e = await v1.recv()
        got.append(e)
        if e["_"] == "append" and e["event"]["event"].get("role") == "assistant":
            return got


async def test_desktop_flow(server):
    base = base_url(server)
    account, device = keypair("desktop-account"), keypair("desktop-device")
    async with httpx.AsyncClient() as http:
        # 1. The probe.
        r = await http.get(base + "/agents/api/health")
        assert r.status_code == 200 and r.json()["ok"] is True
        assert_cors(r.headers)

        # 2. The device key acts for the account before it is registered.
        status, value = await act(http, base, device, {"_": "ListAgents"}, account=account.principal)
        assert status == 403 and value["_"] == "Error" and "Signer is not authorized" in value["message"]

        # 3. RegisterSigner (signed by the device for itself), then the retry, signed anew.
        cap = make_capability(account, device.principal, "AGENT", int(time.time() * 1000), label="desktop")
        status, value = await act(http, base, device, {"_": "RegisterSigner", "capability": cap})
        assert status == 200 and value["_"] == "RegisterSignerResponse", value
        status, value = await act(http, base, device, {"_": "ListAgents"}, account=account.principal)
        assert (status, value) == (200, {"_": "ListAgentsResponse", "agents": []})

        # 4. An agent and a session, over HTTP.
        status, value = await act(http, base, device, {"_": "CreateAgent", "definition": {
            "name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}},
            account=account.principal)
        assert status == 200 and value["_"] == "CreateAgentResponse", value
        status, value = await act(http, base, device, {"_": "CreateSession", "agentId": value["agentId"]},
                                  account=account.principal)
        assert status == 200 and value["_"] == "CreateSessionResponse", value
        session_id = value["sessionId"]
        key = f"sessions/{session_id}"

        # 5. On a v1 socket: Subscribe with afterSeq, then the message over HTTP; the partials
        # and the durable reply arrive on the socket.
        v1 = await V1.open(server.url)
        r = await v1.send(device, {"_": "Subscribe", "key": key, "afterSeq": 0}, account=account.principal)
        assert r == {"_": "subscribed", "key": key, "accountId": account.account_id}
        first = await v1.recv()
        assert first["_"] == "change" and first["value"]["id"] == session_id
        status, value = await act(http, base, device, {"_": "MessageSession", "sessionId": session_id,
                                                       "content": [{"type": "text", "text": "hello desktop"}]},
                                  account=account.principal)
        assert status == 200 and value["_"] == "MessageSessionResponse", value
        events = await read_until_assistant(v1)
        deltas = [e["patch"].get("textDelta", "") for e in events if e["_"] == "appendPartial"]
        assert any(e["_"] == "appendPartial" and e["patch"].get("done") for e in events)
        appends = [e["event"] for e in events if e["_"] == "append"]
        assert [a["seq"] for a in appends] == [1, 2]
        assert appends[0]["event"]["content"] == "hello desktop"
        assert appends[1]["event"]["content"] == "echo: hello desktop" == "".join(deltas)
        last_seq = appends[-1]["seq"]

        # 6. The socket drops; a message is sent meanwhile; a new socket resubscribes from the last
        # seq and gets exactly what it missed: no gap, no duplicate.
        await v1.close()
        status, value = await act(http, base, device, {"_": "MessageSession", "sessionId": session_id,
                                                       "content": [{"type": "text", "text": "while away"}]},
                                  account=account.principal)
        assert status == 200, value
        v1 = await V1.open(server.url)
        r = await v1.send(device, {"_": "Subscribe", "key": key, "afterSeq": last_seq}, account=account.principal)
        assert r["_"] == "subscribed"
        seqs, contents = [], []
        while contents[-1:] != ["echo: while away"]:
            e = await v1.recv()
            if e["_"] == "append":
                seqs.append(e["event"]["seq"])
                contents.append(e["event"]["event"]["content"])
        assert seqs == [last_seq + 1, last_seq + 2]
        assert contents == ["while away", "echo: while away"]
        await v1.close()

"""The desktop's Triggers tab, in its order and shapes (detail.tsx, models.ts): every action over
HTTP by a device key acting for the account, the account's notices on the v1 socket; the
dialog's block-tree prompt and its default sources; a webhook firing shows up as a session
the agent's list marks `startedByTrigger`."""
from __future__ import annotations

import time
import uuid

import httpx

from seed_agents.protocol.wire.capability import make_capability

from tests.httpraw import act, base_url
from tests.wsraw import V1, keypair

PROMPT = [{"block": {"type": "Paragraph", "id": "p1", "text": "Respond to the mention, performing the action requested.",
                     "annotations": []}, "children": []}]


async def test_the_desktop_triggers_tab(server):
    base = base_url(server)
    account, device = keypair("tab-account"), keypair("tab-device")
    async with httpx.AsyncClient() as http:
        async def do(action: dict) -> dict:
            status, value = await act(http, base, device, action, account=account.principal)
            assert status == 200 and not value["_"] == "Error", value
            return value

        cap = make_capability(account, device.principal, "AGENT", int(time.time() * 1000), label="desktop")
        assert (await act(http, base, device, {"_": "RegisterSigner", "capability": cap}))[0] == 200
        agent_id = (await do({"_": "CreateAgent", "definition": {
            "name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}}))["agentId"]
        v1 = await V1.open(server.url)
        r = await v1.send(device, {"_": "Subscribe", "key": f"account/{account.account_id}"}, account=account.principal)
        assert r["_"] == "subscribed"
        # The tab loads the list (empty), then the dialog creates with the desktop's shapes.
        assert (await do({"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"] == []
        made = []
        for source in ({"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}},
                       {"type": "user-mention", "mentionedAccounts": [account.account_id]},
                       {"type": "webhook"}):
            value = await do({"_": "CreateAgentTrigger", "agentId": agent_id, "clientRequestId": str(uuid.uuid4()),
                              "trigger": {"name": f"New {source['type']} trigger", "enabled": True, "source": source,
                                          "prompt": PROMPT}})
            assert value["_"] == "CreateAgentTriggerResponse" and value["trigger"]["prompt"] == PROMPT
            made.append(value["trigger"])
        reasons = []
        while len(reasons) < 3:
            e = await v1.recv()
            if e["_"] == "change" and e["value"].get("reason", "").startswith("trigger-"):
                reasons.append((e["value"]["reason"], e["value"]["agentId"]))
        assert reasons == [("trigger-created", agent_id)] * 3
        # The detail page: edit, then the sessions a firing started.
        edited = (await do({"_": "UpdateAgentTrigger", "triggerId": made[0]["id"],
                            "patch": {"prompt": PROMPT, "source": made[0]["source"], "enabled": False}}))["trigger"]
        assert edited["enabled"] is False
        hook = (await do({"_": "GetAgentTrigger", "triggerId": made[2]["id"]}))["webhook"]
        fired = await http.post(base + hook["path"], json={"event": "deploy"},
                                headers={"Authorization": f"Bearer {hook['secret']}"})
        assert fired.status_code == 202
        got = await do({"_": "GetAgentTrigger", "triggerId": made[2]["id"]})
        assert [s["id"] for s in got["sessions"]] == [fired.json()["sessionId"]]
        sessions = (await do({"_": "GetAgent", "agentId": agent_id}))["sessions"]
        assert sessions[0]["startedByTrigger"]["triggerName"] == "New webhook trigger"
        context = (await do({"_": "GetSession", "sessionId": fired.json()["sessionId"]}))["triggerContext"]
        assert context["promptBlocks"] == PROMPT and context["activity"]["body"] == {"event": "deploy"}
        assert (await do({"_": "DeleteAgentTrigger", "triggerId": made[1]["id"]}))["triggerId"] == made[1]["id"]
        listed = (await do({"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"]
        assert [t["id"] for t in listed] == [made[0]["id"], made[2]["id"]]
        v1.ws.transport.abort()   # (the server fixture stops next; no closing handshake to wait for)

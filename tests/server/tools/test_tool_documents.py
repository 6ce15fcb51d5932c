"""Tool documents (ListAgentTools, SaveAgentTool, DeleteAgentTool) over a real socket: builtins
listed with their CIDs (CIDv1 over the canonical DAG-CBOR of exactly the document), switched off
and on per agent; an authored lambda stored, edited (new CID), renamed, deleted; a lambda is
refused when called where code cannot run (`--code-exec off`, as health says); access: readers
list, writers change. (Lambdas that run: tests/server/sandbox/test_code_exec.py.)"""
from __future__ import annotations

import httpx

from seed_agents.protocol.wire.capability import capability_cid
from seed_agents.protocol.wire.dagcbor import encode
from seed_agents.protocol.agent.tool_documents import BUILTINS

from tests.wsraw import V2Client, keypair, setup_session

LAMBDA = {"name": "weather", "description": "Look up the weather. Returns degrees.", "source": "def main(i): return 1",
          "runtime": "python", "input": {"type": "object", "properties": {"city": {"type": "string"}}}}


def document_of(info: dict) -> dict:
    """The document an AgentToolInfo shows (its CID is over exactly this)."""
    doc = {k: info[k] for k in ("name", "kind", "summary", "description", "input") if k in info}
    for k in ("output", "source", "runtime", "server", "remoteName"):
        if k in info:
            doc[k] = info[k]
    if info["kind"] == "builtin":
        doc["binding"] = info["name"]
    return doc


async def test_tool_documents(server):
    kp = keypair("tooldocs")
    c = await V2Client.open(server.url)
    agent_id, sid = await setup_session(c, kp)
    r = await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id})
    assert r["_"] == "ListAgentToolsResponse" and r["agentId"] == agent_id
    tools = {t["name"]: t for t in r["tools"]}
    assert set(tools) == set(BUILTINS)
    for info in tools.values():
        assert info["kind"] == "builtin" and info["enabled"]
        # every callable is granted (the agent names no list), but execute: code does not run here
        assert info["granted"] is (info["name"] != "execute")
        assert info["cid"] == capability_cid(encode(document_of(info)))
    again = await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id})
    assert again["tools"] == r["tools"]   # listing twice changes nothing

    # a builtin is switched off and on; it cannot be deleted or replaced
    off = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {"name": "search"}, "enabled": False})
    assert off["tool"]["enabled"] is False and off["tool"]["cid"] == tools["search"]["cid"]
    r = await c.call(kp, {"_": "DeleteAgentTool", "agentId": agent_id, "name": "search"})
    assert r["_"] == "Error" and r["status"] == 400 and "disable" in r["message"]
    r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {**LAMBDA, "name": "search"}})
    assert r["_"] == "Error" and r["status"] == 400
    on = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {"name": "search"}, "enabled": True})
    assert on["tool"]["enabled"] is True

    # an authored lambda: stored, edited (its CID moves), renamed, deleted
    saved = (await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": LAMBDA}))["tool"]
    assert saved["kind"] == "lambda" and saved["summary"] == "Look up the weather."
    assert saved["cid"] == capability_cid(encode(document_of(saved)))
    # as the reference: creating (no previousName) over a taken name is 409, not a replacement
    # (the desktop's Add tool dialog sends none); an edit names the tool it edits
    r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {**LAMBDA, "source": "other"}})
    assert (r["_"], r["status"]) == ("Error", 409) and "already exists" in r["message"], r
    edited = (await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "weather",
                                "tool": {**LAMBDA, "source": "def main(i): return 2"}}))["tool"]
    assert edited["cid"] != saved["cid"] and edited["createdAt"] == saved["createdAt"]
    r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "gone",
                          "tool": {**LAMBDA, "name": "forecast"}})
    assert (r["_"], r["status"]) == ("Error", 404), r
    r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "navigate",
                          "tool": {**LAMBDA, "name": "forecast"}})
    assert (r["_"], r["status"]) == ("Error", 400) and "cannot be edited" in r["message"], r
    await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {**LAMBDA, "name": "other"}})
    r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "other",
                          "tool": {**LAMBDA, "name": "weather"}})
    assert (r["_"], r["status"]) == ("Error", 409), r
    await c.call(kp, {"_": "DeleteAgentTool", "agentId": agent_id, "name": "other"})
    # a rename keeps the tool's createdAt and its switch
    await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "weather",
                      "tool": {**LAMBDA, "source": "def main(i): return 2"}, "enabled": False})
    renamed = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "weather",
                                "tool": {**LAMBDA, "name": "forecast"}})
    assert renamed["tool"]["createdAt"] == saved["createdAt"] and renamed["tool"]["enabled"] is False
    await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "previousName": "forecast",
                      "tool": {**LAMBDA, "name": "forecast"}, "enabled": True})
    names = {t["name"] for t in (await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id}))["tools"]}
    assert renamed["tool"]["name"] == "forecast" and "forecast" in names and "weather" not in names
    for bad in ({**LAMBDA, "name": "Bad Name"}, {**LAMBDA, "source": ""}, {**LAMBDA, "input": {"type": 12}}):
        r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": bad})
        assert r["_"] == "Error" and r["status"] == 400 and "SaveAgentTool.tool" in r["message"], r

    # stored, but refused when called: this server runs no code, and health says so
    r = await c.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                          "input": {"tool": "forecast", "input": {"city": "Oslo"}}})
    assert "code execution is not available" in r["error"], r
    port = server.url.split(":")[2].split("/")[0]
    async with httpx.AsyncClient() as http:
        health = (await http.get(f"http://127.0.0.1:{port}/api/health")).json()
    assert health["codeExec"] is False and health["codeExecReason"]

    # a reader lists; only a writer changes
    reader, rc = keypair("tooldocs-reader"), await V2Client.open(server.url)
    await c.call(kp, {"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": True})
    listed = await rc.call(reader, {"_": "ListAgentTools", "agentId": agent_id})
    assert {t["name"] for t in listed["tools"]} == names
    r = await rc.call(reader, {"_": "DeleteAgentTool", "agentId": agent_id, "name": "forecast"})
    assert r["_"] == "Error" and r["status"] == 403
    r = await rc.call(reader, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "write",
                               "input": {"address": "~/memory/x.md", "content": "x"}})
    assert r["_"] == "Error" and r["status"] == 403
    r = await rc.call(reader, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "read",
                               "input": {"address": "~/tools/search"}})
    assert r["_"] == "InvokeSessionToolResponse" and "# search" in r["output"]["markdown"], r

    r = await c.call(kp, {"_": "DeleteAgentTool", "agentId": agent_id, "name": "forecast"})
    assert r == {"_": "DeleteAgentToolResponse", "agentId": agent_id, "name": "forecast", "deleted": True}
    r = await c.call(kp, {"_": "DeleteAgentTool", "agentId": agent_id, "name": "forecast"})
    assert r["deleted"] is False
    await rc.close()
    await c.close()

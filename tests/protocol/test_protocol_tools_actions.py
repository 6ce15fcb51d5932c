"""The parsers of section 8's tool actions (protocol/api/actions_tools.py): bytes in, a typed action or
a 400 naming the field."""
from __future__ import annotations

import pytest

from seed_agents.protocol.api.actions import parse_action
from seed_agents.protocol.wire.capability import capability_cid
from seed_agents.protocol.wire.dagcbor import encode
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.tool_documents import builtin_document, encode_document, mcp_document

TS = 1_700_000_000_000


def parse(**action):
    return parse_action({"ts": TS, **action})


def refused(**action) -> str:
    with pytest.raises(ProtocolError) as exc:
        parse(**action)
    assert exc.value.status == 400
    return exc.value.message


def test_signal_run_and_journal():
    a = parse(_="SignalRun", runId="r", signal="approved", payload={"ok": [1, 2]})
    assert (a.run_id, a.signal, a.payload) == ("r", "approved", {"ok": [1, 2]})
    assert "SignalRun.payload must be at most" in refused(_="SignalRun", runId="r", signal="s", payload="x" * 70_000)
    assert "SignalRun.signal" in refused(_="SignalRun", runId="r", signal="")
    assert parse(_="GetRunJournal", runId="r").after_seq == 0
    assert "GetRunJournal.afterSeq" in refused(_="GetRunJournal", runId="r", afterSeq=-1)


def test_save_agent_tool():
    a = parse(_="SaveAgentTool", agentId="a", tool={"name": "search"}, enabled=False)
    assert (a.name, a.doc, a.enabled) == ("search", None, False)
    assert "enabled is required" in refused(_="SaveAgentTool", agentId="a", tool={"name": "search"})
    lam = parse(_="SaveAgentTool", agentId="a", tool={"name": "my-tool", "description": "Does it. More.",
                                                     "source": "x", "runtime": "python"})
    assert lam.doc["kind"] == "lambda" and lam.doc["summary"] == "Does it." and lam.doc["input"] == {"type": "object"}
    assert "name" in refused(_="SaveAgentTool", agentId="a", tool={"name": "A", "description": "d", "source": "x"})
    assert "runtime" in refused(_="SaveAgentTool", agentId="a",
                                tool={"name": "ab", "description": "d", "source": "x", "runtime": "rust"})
    assert "builtin" in refused(_="SaveAgentTool", agentId="a",
                                tool={"name": "return_result", "description": "d", "source": "x"})


def test_invoke_session_tool():
    assert parse(_="InvokeSessionTool", sessionId="s", verb="read", input={"address": "~/self"}).verb == "read"
    assert "InvokeSessionTool.verb" in refused(_="InvokeSessionTool", sessionId="s", verb="delegate", input={})


def test_set_mcp_server():
    a = parse(_="SetMcpServer", name="calc-2", url="https://mcp.example/mcp", headers={"X-Team": "a"},
              secretHeaders={"Authorization": "Bearer t"})
    assert a.headers == {"x-team": "a"} and a.secret_headers == {"authorization": "Bearer t"} and a.enabled
    assert "name" in refused(_="SetMcpServer", name="my_server", url="https://x/mcp")
    assert "url" in refused(_="SetMcpServer", name="x", url="https://user:pw@x/mcp")
    assert "url" in refused(_="SetMcpServer", name="x", url="file:///etc/passwd")
    assert "headers.x" in refused(_="SetMcpServer", name="x", url="https://x/mcp", headers={"x": "a\r\nb: c"})
    assert "transport" in refused(_="SetMcpServer", name="x", url="https://x/mcp", transport="sse")
    assert "secretHeaders" in refused(_="SetMcpServer", name="x", url="https://x/mcp", headers={"a": "1"},
                                      secretHeaders={"A": "2"})


def test_documents_are_content_addressed():
    doc = builtin_document("search")
    cid, data = encode_document(doc)
    assert data == encode(doc) and cid == capability_cid(data) and cid.startswith("bafyrei")
    assert encode_document({**doc, "description": doc["description"] + "!"})[0] != cid
    projected = mcp_document("calc", {"name": "add", "inputSchema": {"type": "object"}})
    assert projected["name"] == "calc__add" and projected["remoteName"] == "add" and projected["kind"] == "mcp"

"""Remote MCP servers through the official SDK, against real MCP servers in child processes: one
made with the SDK itself (Streamable HTTP, two tools of which one fails, a secret header it
checks), one that hangs, one that answers garbage, one that lists more than 10,000 tools.

Checked as a client sees it: SetMcpServer / ListMcpServers / RefreshMcpServer / DeleteMcpServer,
the agent's `<server>__<tool>` documents, a model calling them through `call` (input checked
against the tool's schema first), the user calling one with InvokeSessionTool, a failed refresh
keeping the tools, removal taking the documents, the secret and the agents' references."""
from __future__ import annotations

import time

import pytest

from seed_agents.server.main import start_server
from seed_agents.server.store import secrets_table as secrets_q

from tests.conftest import make_config, running_server
from tests.fakes.mcp_server import McpFake
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.runtime.test_tool_loop import agent_session, call
from tests.waiting import until
from tests.wsraw import V2Client, keypair


@pytest.fixture
async def server(tmp_path):
    async with running_server(make_config(tmp_path, mcp_timeout=2.0)) as running:
        yield running


@pytest.fixture
async def calc():
    async with McpFake("calc", "s3cret-key") as fake:
        yield fake


def results(events: list[dict]) -> dict:
    return {e["toolCallId"]: e for e in events if e["type"] == "tool_result"}


async def test_an_mcp_server_end_to_end(server, calc):
    kp = keypair("mcp-owner")
    async with FakeOpenAI() as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        r = await c.call(kp, {"_": "SetMcpServer", "name": "calc", "url": calc.url,
                              "secretHeaders": {"X-Api-Key": "s3cret-key"}})
        assert r["_"] == "SetMcpServerResponse", r
        info = r["server"]
        assert info["status"]["state"] == "ok" and [t["name"] for t in info["tools"]] == ["add", "fail"]
        assert info["secretHeaders"] == ["x-api-key"] and b"s3cret-key" not in repr(r).encode()
        # the header value is a secret, sealed like any other
        agent = (await c.call(kp, {"_": "GetAgent", "agentId": agent_id}))["agent"]
        sealed = server.app.db.read(secrets_q.get_secret_ciphertext, agent["account"], "mcp-calc-x-api-key")
        assert sealed is not None and b"s3cret-key" not in bytes(sealed)

        # the agent picks the server: its tools become documents
        definition = {**agent["definition"], "mcpServers": ["calc"]}
        r = await c.call(kp, {"_": "UpdateAgent", "agentId": agent_id, "definition": definition})
        assert r["_"] == "GetAgentResponse", r   # (UpdateAgent answers as the reference does)
        tools = {t["name"]: t for t in (await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id}))["tools"]}
        assert tools["calc__add"]["kind"] == "mcp" and tools["calc__add"]["cid"].startswith("bafy")
        assert tools["calc__add"]["input"]["required"] == ["a", "b"] and tools["calc__add"]["enabled"]

        # a model calls them through `call`: one works, one fails, one has input that does not fit
        fake.enqueue(Script(chunks=[], tool_calls=[
            call("k1", "call", {"tool": "calc__add", "input": {"a": 2, "b": 40}}),
            call("k2", "call", {"tool": "calc__fail", "input": {"reason": "test"}}),
            call("k3", "call", {"tool": "calc__add", "input": {"a": "two"}})]), Script(chunks=["Sum is 42."]))
        r = await c.call(kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "add"}]})
        run_id = r["runId"]
        async def succeeded() -> bool:
            return (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]["status"] == "succeeded"

        await until(succeeded, 20, step=0.05)
        events = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]]
        got = results(events)
        assert got["k1"]["output"] == {"result": 42}
        assert "fail" in got["k2"]["error"]
        assert "does not fit calc__add's input schema" in got["k3"]["error"]
        call_tool = next(t for t in fake.requests[0].body["tools"] if t["function"]["name"] == "call")
        assert "calc__add" in call_tool["function"]["description"]   # listed with the callables

        # the user runs the same tool from the palette
        r = await c.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                              "input": {"tool": "calc__add", "input": {"a": 1, "b": 1}}})
        assert r["_"] == "InvokeSessionToolResponse" and r["output"] == {"result": 2}, r
        last = [e["event"] for e in (await c.call(kp, {"_": "GetSession", "sessionId": sid}))["events"]][-2:]
        assert [e["type"] for e in last] == ["tool_call", "tool_result"] and {e["actor"] for e in last} == {"user"}

        # a disabled MCP tool is not offered, and cannot be called
        r = await c.call(kp, {"_": "SaveAgentTool", "agentId": agent_id, "tool": {"name": "calc__fail"},
                              "enabled": False})
        assert r["tool"]["enabled"] is False
        r = await c.call(kp, {"_": "InvokeSessionTool", "sessionId": sid, "verb": "call",
                              "input": {"tool": "calc__fail", "input": {}}})
        assert "No callable tool named calc__fail" in r["output"]["summary"]   # answered with the listing

        # the server goes away: a refresh fails (502) and keeps what it knew
        await calc.stop()
        r = await c.call(kp, {"_": "RefreshMcpServer", "name": "calc"})
        assert r["_"] == "Error" and r["status"] == 502 and "kept" in r["message"], r
        listed = (await c.call(kp, {"_": "ListMcpServers"}))["servers"][0]
        assert listed["status"]["state"] == "error" and listed["toolCount"] == 2
        assert "calc__add" in {t["name"] for t in (await c.call(kp, {"_": "ListAgentTools",
                                                                    "agentId": agent_id}))["tools"]}

        # removal takes its documents, its secret and the agent's reference
        r = await c.call(kp, {"_": "DeleteMcpServer", "name": "calc"})
        assert r == {"_": "DeleteMcpServerResponse", "name": "calc", "deleted": True}
        names = {t["name"] for t in (await c.call(kp, {"_": "ListAgentTools", "agentId": agent_id}))["tools"]}
        assert not any(n.startswith("calc__") for n in names)
        assert (await c.call(kp, {"_": "GetAgent", "agentId": agent_id}))["agent"]["definition"]["mcpServers"] == []
        assert server.app.db.read(secrets_q.get_secret_ciphertext, agent["account"], "mcp-calc-x-api-key") is None
        assert (await c.call(kp, {"_": "ListMcpServers"}))["servers"] == []
        await c.close()


async def test_hostile_mcp_servers_are_bounded(server):
    kp = keypair("mcp-hostile")
    c = await V2Client.open(server.url)
    async with McpFake("hang") as hang, McpFake("garbage") as garbage:
        # (garbage first: it also starts the discovery worker, whose start is not the remote's time)
        r = await c.call(kp, {"_": "SetMcpServer", "name": "junk", "url": garbage.url})
        assert r["server"]["status"]["state"] == "error" and "not valid MCP" in r["server"]["status"]["error"]
        assert "this is not" not in repr(r)
        started = time.monotonic()
        r = await c.call(kp, {"_": "SetMcpServer", "name": "slow", "url": hang.url})
        assert r["server"]["status"]["state"] == "error" and "did not answer in time" in r["server"]["status"]["error"]
        assert time.monotonic() - started < 10    # --mcp-timeout is 2 s here
        bad = await c.call(kp, {"_": "SetMcpServer", "name": "Bad_Name", "url": garbage.url})
        assert bad["_"] == "Error" and bad["status"] == 400
        bad = await c.call(kp, {"_": "SetMcpServer", "name": "x", "url": "ftp://example.com/"})
        assert bad["_"] == "Error" and bad["status"] == 400
    await c.close()


async def listing_is_bounded(tmp_path, listed: int, kept: int, **settings) -> None:
    running = await start_server(make_config(tmp_path, mcp_timeout=60.0, **settings))
    many = await McpFake("many", str(listed)).__aenter__()
    try:
        kp = keypair("mcp-many")
        c = await V2Client.open(running.url)
        r = await c.call(kp, {"_": "SetMcpServer", "name": "many", "url": many.url}, timeout=120)
        status = r["server"]["status"]
        assert status["state"] == "ok", status
        assert status["skipped"] == listed - kept and r["server"]["toolCount"] == kept
        await c.close()
    finally:
        await many.stop()
        await running.stop()


async def test_a_long_tool_listing_is_bounded(tmp_path):
    """The bound at a small size (the same code path as the default; the full size is behind slow)."""
    await listing_is_bounded(tmp_path, 150, 100, mcp_max_tools=100)


@pytest.mark.slow
async def test_a_listing_of_more_than_1000_tools_keeps_1000(tmp_path):
    await listing_is_bounded(tmp_path, 1_050, 1_000)   # --mcp-max-tools' default


async def test_the_network_policy_holds_for_mcp(tmp_path):
    """A server that refuses loopback (as one listening beyond it does by default) never connects
    to an MCP server there."""
    running = await start_server(make_config(tmp_path, provider_networks="public"))
    calc = await McpFake("calc", "k").__aenter__()
    try:
        kp = keypair("mcp-policy")
        c = await V2Client.open(running.url)
        r = await c.call(kp, {"_": "SetMcpServer", "name": "calc", "url": calc.url, "secretHeaders": {"x-api-key": "k"}})
        assert r["server"]["status"]["state"] == "error" and "network policy" in r["server"]["status"]["error"]
        await c.close()
    finally:
        await calc.stop()
        await running.stop()


async def test_the_mcp_commands(server, calc, tmp_path):
    """`seed-agents mcp add/ls/rm` as a person runs them (child processes; refresh is the same call
    as the action RefreshMcpServer above)."""
    from tests.clients.test_cli_commands import cli_env, run_cli

    env = cli_env(tmp_path, server.url.replace("ws://", "http://").rsplit("/agents/ws", 1)[0])
    code, _, err = await run_cli(env, "keygen")
    assert code == 0, err
    # The server's discovery worker started first (its SDK imports take seconds on a busy machine,
    # once per server), by another account, so the CLI's own time is what is bounded below.
    c = await V2Client.open(server.url)
    r = await c.call(keypair("mcp-warm"), {"_": "SetMcpServer", "name": "warm", "url": calc.url,
                                            "secretHeaders": {"x-api-key": "s3cret-key"}})
    assert r["server"]["status"]["state"] == "ok", r
    await c.close()
    secret = tmp_path / "key.txt"
    secret.write_text("s3cret-key\n")
    code, out, err = await run_cli(env, "mcp", "add", "calc", calc.url, "--secret-header", f"x-api-key={secret}")
    assert code == 0, (out, err)
    assert out.startswith("calc  ") and "2 tools  ok" in out
    code, out, err = await run_cli(env, "mcp", "ls", "--tools")
    assert code == 0 and "calc__add" in out and "s3cret" not in out, (out, err)
    code, out, err = await run_cli(env, "mcp", "rm", "calc")
    assert code == 0 and "removed calc" in err

"""Provider URLs (docs/operations.md "Security"): a baseUrl with a query or fragment is refused,
paths are joined to it by the URL library (a baseUrl cannot turn `/models` into a query of an
internal service), and a non-owner never sees a provider URL (a durable session error event, a
502) nor a server path (AgentInfo.stateDir). Everything over real sockets: the server, and an
"internal service" that records what it was asked."""
from __future__ import annotations

import asyncio

import pytest

from tests.waiting import until
from tests.wsraw import V2Client, keypair

OWNER, WRITER, READER = keypair("url owner"), keypair("url writer"), keypair("url reader")


@pytest.fixture
async def internal():
    """A loopback HTTP service that records each request line and answers 500."""
    lines: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines.append(head.split(b"\r\n", 1)[0].decode())
            body = b'{"users": [{"name": "admin", "token": "admin-token-123"}]}'
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", lines
    finally:
        server.close()


async def test_base_urls_are_joined_by_a_url_library_and_never_shown_to_non_owners(server, internal):
    base, lines = internal
    o, w, r = [await V2Client.open(server.url) for _ in range(3)]
    try:
        # A query or a fragment is refused when the provider is set.
        for bad in (base + "/internal/admin/users?page=", base + "/v1#x"):
            got = await o.call(OWNER, {"_": "SetModelProvider", "name": "bad",
                                       "provider": {"type": "custom", "baseUrl": bad}})
            assert got["status"] == 400 and "baseUrl" in got["message"] and "query" in got["message"]
        got = await o.call(OWNER, {"_": "SetModelProvider", "name": "internal",
                                   "provider": {"type": "custom", "baseUrl": base + "/internal/admin/users"}})
        assert got["_"] != "Error", got
        got = await o.call(OWNER, {"_": "CreateAgent", "definition": {
            "name": "u", "systemPrompt": "", "modelProvider": "internal", "model": "m"}})
        agent_id = got["agentId"]
        # The path is appended to the base's path: never its query.
        got = await o.call(OWNER, {"_": "ListProviderModels", "provider": "internal"})
        assert got["status"] == 502 and "admin-token-123" not in got["message"]
        assert lines[-1] == "GET /internal/admin/users/models HTTP/1.1"

        for kp, role in ((WRITER, "writer"), (READER, "reader")):
            await o.call(OWNER, {"_": "InviteAgentCollaborator", "agentId": agent_id,
                                 "accountId": kp.account_id, "role": role})
        assert (await w.call(WRITER, {"_": "AcceptAgentInvite", "agentId": agent_id}))["_"] != "Error"
        assert (await r.call(READER, {"_": "AcceptAgentInvite", "agentId": agent_id}))["_"] != "Error"

        # A writer's ListProviderModels of the agent: 502, no URL.
        got = await w.call(WRITER, {"_": "ListProviderModels", "provider": "internal", "agentId": agent_id})
        assert got["status"] == 502 and "127.0.0.1" not in got["message"] and "/internal" not in got["message"]
        # A turn that fails: the durable error event a reader sees names no URL.
        session_id = (await o.call(OWNER, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await o.call(OWNER, {"_": "MessageSession", "sessionId": session_id,
                             "content": [{"type": "text", "text": "hi"}]})
        async def failed() -> list | None:
            events = (await r.call(READER, {"_": "GetSession", "sessionId": session_id}))["events"]
            return [e for e in events if e["event"].get("type") == "error"] or None

        errors = await until(failed, 20, step=0.05, what="the turn's error")
        text = repr(errors)
        assert "127.0.0.1" not in text and "/internal" not in text and "provider custom" in text
        # stateDir: the owner's path on the server's disk; a collaborator gets none.
        mine = (await o.call(OWNER, {"_": "GetAgent", "agentId": agent_id}))["agent"]
        theirs = (await r.call(READER, {"_": "GetAgent", "agentId": agent_id}))["agent"]
        listed = (await w.call(WRITER, {"_": "ListAgents"}))["agents"]
        assert mine["stateDir"].endswith(agent_id) and theirs["stateDir"] == ""
        assert [a["stateDir"] for a in listed] == [""]
    finally:
        for c in (o, w, r):
            await c.close()

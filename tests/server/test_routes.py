"""The action table: every action of the protocol has one route, and a route marked inline has
a handler that never awaits (v2 answers it in the socket's reader, where an await would stall
every other request of that socket)."""
from __future__ import annotations

import pytest

from seed_agents.protocol.api.actions import ACTIONS, parse_action
from seed_agents.protocol.wire.envelope import build_envelope, verify_envelope
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.server.routes import INLINE_ACTIONS, ROUTES

from tests.wsraw import V2Client, keypair, setup_session


def test_the_table_covers_every_action():
    assert set(ROUTES) == set(ACTIONS)
    for name, route in ROUTES.items():
        assert route.name == name and route.read == ACTIONS[name].read and callable(route.handler)
        assert route.read or not route.inline, name   # a write is never answered inline


def test_reads_are_said_per_action():
    """Replay protection hangs on this flag: the reads, said one by one (a new action must be
    put here on purpose, not slip in through a name prefix)."""
    assert {n for n, r in ROUTES.items() if r.read} == {
        "ListProviderModels", "ListModelProviders", "GetAgent", "ListAgents", "ListSessions",
        "GetSession", "Subscribe", "GetRun", "ListRuns", "ListAgentCollaborators", "ListAgentInvites",
        "ListSigningIdentities",
        # files
        "ListAgentMemory", "ReadAgentMemoryFile", "SearchAgentMemory", "ReadSessionAttachment"} | TOOL_READS | {
        "ListAgentTriggers", "GetAgentTrigger"} | {   # triggers
            "GetSessionHead", "GetSessionChain"} | {   # verifiable history
            "GetProviderOAuthStatus"}   # subscription sign-in


TOOL_READS = {"ListAgentTools", "GetRunJournal", "ListMcpServers"}   # section 8: tools and the run tree


def _samples(agent_id: str, session_id: str) -> dict[str, list[dict]]:
    """For each inline action, requests that reach its answer and its refusals."""
    return {
        "GetSession": [{"sessionId": session_id}, {"sessionId": session_id, "afterSeq": 1, "limit": 1},
                       {"sessionId": "no-such-session"}],
        "ListModelProviders": [{}, {"agentId": agent_id}],
        "GetSessionHead": [{"sessionId": session_id}, {"sessionId": "no-such-session"}],
    }


# SQLite only: on a shared (PostgreSQL) store every read waits for the database, so the socket
# runs none inline (server/transport/connection.py, `inline_reads`).
@pytest.mark.storages("sqlite")
async def test_inline_handlers_never_await(server):
    """Each inline handler's coroutine, run against the real app and database, finishes on its
    first step: it returns (StopIteration) or refuses (ProtocolError) without ever yielding."""
    app = server.app
    kp = keypair("inline")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, kp)
    r = await c.call(kp, {"_": "SetModelProvider", "name": "local", "provider": {
        "type": "ollama", "baseUrl": "http://127.0.0.1:9/v1"}})
    assert r["_"] == "SetModelProviderResponse", r
    r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                          "content": [{"type": "text", "text": "hello"}]})
    assert r["_"] == "MessageSessionResponse", r
    await c.close()

    samples = _samples(agent_id, session_id)
    assert set(samples) == INLINE_ACTIONS, "give each inline action a sample request here"
    answered = 0
    for name in sorted(INLINE_ACTIONS):
        for fields in samples[name]:
            env = verify_envelope(build_envelope(kp, {"_": name, **fields}), now_ms=app.now_ms())
            coro = ROUTES[name].handler(app.context, env, parse_action(env.action))
            try:
                step = coro.send(None)
            except StopIteration as done:
                assert done.value["_"] == name + "Response", done.value
                answered += 1
            except ProtocolError as refused:
                assert refused.status in (400, 404), refused
            else:
                coro.close()
                pytest.fail(f"{name} {fields} awaited ({step!r}): it must not be inline")
    assert answered >= len(INLINE_ACTIONS)

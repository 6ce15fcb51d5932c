"""Text a store cannot keep, and text that outlives its session (docs/protocol.md): NUL in any
text field is a 400 at parse time on both stores (PostgreSQL text cannot hold it; SQLite must
not accept what the other refuses), so no later turn fails on it; and a run's title, taken from
its session, goes when the session is deleted. Over a real socket, on SQLite and PostgreSQL."""
from __future__ import annotations

import pytest

from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

pytestmark = pytest.mark.storages("sqlite", "postgresql")


async def test_nul_in_text_is_refused_at_parse_time(server):
    kp = keypair("nul writer")
    c = await V2Client.open(server.url)
    try:
        agent_id, session_id = await setup_session(c, kp)
        refused = [
            {"_": "CreateAgent", "definition": {"name": "a\x00b", "systemPrompt": "", "modelProvider": "echo",
                                                "model": "m"}},
            {"_": "UpdateAgent", "agentId": agent_id, "definition": {"name": "x", "systemPrompt": "",
                                                                     "modelProvider": "echo", "model": "m\x00"}},
            {"_": "UpdateSession", "sessionId": session_id, "modelOverride": {"provider": "echo\x00", "model": "m"}},
            {"_": "UpdateSession", "sessionId": session_id, "title": "t\x00"},
            {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "\x00hi"}]},
        ]
        for action in refused:
            r = await c.call(kp, action)
            assert r["_"] == "Error" and r["status"] == 400 and "NUL" in r["message"], (action, r)
        # The session still works: a turn runs.
        r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                              "content": [{"type": "text", "text": "hello"}]})
        assert r["_"] == "MessageSessionResponse", r
        async def replied() -> bool:
            return len((await c.call(kp, {"_": "GetSession", "sessionId": session_id}))["events"]) >= 2

        await until(replied, 20, step=0.05)
    finally:
        await c.close()


async def test_run_titles_go_with_their_session(server):
    kp = keypair("titled runs")
    c = await V2Client.open(server.url)
    try:
        agent_id, session_id = await setup_session(c, kp)
        r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id,
                              "content": [{"type": "text", "text": "my secret plan\nmore"}]})
        run_id = r["runId"]
        async def succeeded() -> bool:
            return (await c.call(kp, {"_": "GetRun", "runId": run_id}))["run"]["status"] == "succeeded"

        await until(succeeded, 20, step=0.05)
        runs = (await c.call(kp, {"_": "ListRuns", "agentId": agent_id}))["runs"]
        assert [x["title"] for x in runs] == ["my secret plan"]
        assert (await c.call(kp, {"_": "DeleteSession", "sessionId": session_id}))["_"] == "DeleteSessionResponse"
        runs = (await c.call(kp, {"_": "ListRuns", "agentId": agent_id}))["runs"]
        assert [(x["id"], x["title"], "sessionId" in x) for x in runs] == [(run_id, "", False)]
    finally:
        await c.close()

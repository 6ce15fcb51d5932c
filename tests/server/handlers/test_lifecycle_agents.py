"""UpdateAgent, DeleteAgent and DeleteModelProvider end to end, and the start-up reconciliation
of agent state directories."""
from __future__ import annotations

import os

from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import runs as runs_q

from tests.conftest import make_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.handlers.test_lifecycle_sessions import call, nothing_after_the_deletion, reply_streams, wait_for, watched_session
from tests.server.runtime.test_runtime_turns import API_KEY, provider_session, send, session_status, until_durable
from tests.wsraw import V2Client, keypair, setup_session
from tests.model_view import without_preamble

ECHO = {"name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


async def test_update_agent_changes_the_next_turn(server):
    a, b = keypair("A"), keypair("B")
    async with FakeOpenAI(Script(chunks=["ok"])) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await provider_session(c, a, fake, system="old prompt")
        await c.event(); await c.event()
        await send(c, a, sid, "one")
        await until_durable(c, 2)
        got = await call(c, a, {"_": "GetSession", "sessionId": sid})
        assert got["systemPromptMarkdown"] == "old prompt"   # now cached
        definition = {"name": "Renamed", "systemPrompt": "new prompt", "modelProvider": "fake",
                      "model": "model-2", "metadata": {"k": 1}}
        agent_watch = await V2Client.open(server.url)
        await call(agent_watch, a, {"_": "Subscribe", "key": f"agents/{agent_id}"})
        await agent_watch.event()   # the current AgentInfo
        r = await call(c, a, {"_": "UpdateAgent", "agentId": agent_id, "definition": definition})
        assert r["_"] == "GetAgentResponse" and r["agent"]["definition"] == definition
        assert r["agent"]["id"] == agent_id
        e = await agent_watch.event()
        assert e["_"] == "change" and e["value"]["definition"] == definition
        got = await call(c, a, {"_": "GetSession", "sessionId": sid})
        assert got["systemPromptMarkdown"] == "new prompt"
        await session_status(c, a, sid, "idle")
        await send(c, a, sid, "two")
        await until_durable(c, 2)
        body = fake.requests[-1].body
        assert body["model"] == "model-2" and without_preamble(body["messages"])[0] == {"role": "system", "content": "new prompt"}
        # another account: 404; a provider the account lacks: 400; bad fields: 400
        c2 = await V2Client.open(server.url)
        r = await call(c2, b, {"_": "UpdateAgent", "agentId": agent_id, "definition": ECHO})
        assert (r["_"], r["status"]) == ("Error", 404)
        r = await call(c, a, {"_": "UpdateAgent", "agentId": agent_id,
                             "definition": {**ECHO, "modelProvider": "nope"}})
        assert (r["_"], r["status"]) == ("Error", 400) and "modelProvider" in r["message"]
        r = await call(c, a, {"_": "UpdateAgent", "agentId": agent_id, "definition": {**ECHO, "name": 5}})
        assert (r["_"], r["status"]) == ("Error", 400) and "UpdateAgent.definition.name" in r["message"]
        await c.close(); await c2.close(); await agent_watch.close()


async def test_delete_agent_removes_everything_and_its_directory(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    r = await call(c, a, {"_": "CreateAgent", "definition": ECHO, "clientRequestId": "make-1"})
    agent_id = r["agentId"]
    state_dir = (await call(c, a, {"_": "GetAgent", "agentId": agent_id}))["agent"]["stateDir"]
    assert os.path.isdir(state_dir)   # made at CreateAgent
    sid = (await call(c, a, {"_": "CreateSession", "agentId": agent_id, "clientRequestId": "s-1"}))["sessionId"]
    await send(c, a, sid, "hello", clientMessageId="m-1")
    await session_status(c, a, sid, "idle")
    keep_agent, keep_sid = await setup_session(c, a)
    await send(c, a, keep_sid, "stay")
    c2 = await V2Client.open(server.url)
    r = await call(c2, b, {"_": "DeleteAgent", "agentId": agent_id})
    assert (r["_"], r["status"]) == ("Error", 404)
    r = await call(c, a, {"_": "DeleteAgent", "agentId": 3})
    assert (r["_"], r["status"]) == ("Error", 400) and "DeleteAgent.agentId" in r["message"]
    r = await call(c, a, {"_": "DeleteAgent", "agentId": agent_id})
    assert r == {"_": "DeleteAgentResponse", "agentId": agent_id}
    assert not os.path.exists(state_dir)
    for action in ({"_": "GetAgent", "agentId": agent_id}, {"_": "GetSession", "sessionId": sid},
                   {"_": "DeleteAgent", "agentId": agent_id}):
        r = await call(c, a, action)
        assert (r["_"], r["status"]) == ("Error", 404), action

    def counts(conn):
        q = lambda sql, *p: conn.execute(sql, p).fetchone()[0]  # noqa: E731
        return (q("SELECT count(*) FROM sessions WHERE agent_id = ?", agent_id),
                q("SELECT count(*) FROM runs WHERE agent_id = ?", agent_id),
                q("SELECT count(*) FROM session_events WHERE session_id = ?", sid),
                q("SELECT count(*) FROM idempotency WHERE account_id = ?", a.account_id))

    assert server.app.db.read(counts) == (0, 0, 0, 0)
    # the idempotency records went with it: the same client ids make new things
    r = await call(c, a, {"_": "CreateAgent", "definition": ECHO, "clientRequestId": "make-1"})
    assert r["agentId"] != agent_id
    # the other agent is untouched
    got = await session_status(c, a, keep_sid, "idle")
    assert [e["event"]["content"] for e in got["events"]] == ["stay", "echo: stay"]
    await c.close(); await c2.close()


async def test_delete_agent_while_a_reply_streams(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=[f"w{i} " for i in range(300)], chunk_delay=0.01)) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid, watcher = await watched_session(server, c, a, fake)
        await send(c, a, sid, "talk")
        await send(c, a, sid, "queued behind")
        await reply_streams(watcher)
        r = await call(c, a, {"_": "DeleteAgent", "agentId": agent_id})
        assert r == {"_": "DeleteAgentResponse", "agentId": agent_id}
        await fake.wait_for_disconnect()
        await call(c, a, {"_": "ListAgents"})
        await nothing_after_the_deletion(watcher)
        assert len(fake.requests) == 1   # the queued run never reached the provider
        assert server.app.db.read(lambda conn: conn.execute(
            "SELECT count(*) FROM runs WHERE agent_id = ?", (agent_id,)).fetchone()[0]) == 0
        await c.close(); await watcher.close()


async def test_delete_model_provider_and_its_secret(server):
    a, b = keypair("A"), keypair("B")
    async with FakeOpenAI() as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        # a second provider sharing the secret keeps it alive through the first deletion
        await call(c, a, {"_": "SetModelProvider", "name": "twin", "provider": {
            "type": "custom", "baseUrl": fake.base_url, "secretRefs": {"apiKey": "fake-key"}}})
        c2 = await V2Client.open(server.url)
        r = await call(c2, b, {"_": "DeleteModelProvider", "name": "fake"})
        assert (r["_"], r["status"]) == ("Error", 404)
        r = await call(c, a, {"_": "DeleteModelProvider", "name": ""})
        assert (r["_"], r["status"]) == ("Error", 400) and "DeleteModelProvider.name" in r["message"]
        r = await call(c, a, {"_": "DeleteModelProvider", "name": "echo"})
        assert (r["_"], r["status"]) == ("Error", 400)
        assert await call(c, a, {"_": "DeleteModelProvider", "name": "fake"}) == {
            "_": "DeleteModelProviderResponse", "name": "fake"}
        secrets = lambda: server.app.db.read(lambda conn: [n for (n,) in conn.execute(  # noqa: E731
            "SELECT name FROM secrets WHERE account_id = ?", (a.account_id,))])
        assert secrets() == ["fake-key"]
        r = await call(c, a, {"_": "DeleteModelProvider", "name": "fake"})
        assert (r["_"], r["status"]) == ("Error", 404)
        # the agent that used it fails its next turn with a clear error
        await send(c, a, sid, "anyone?")
        _, appends = await until_durable(c, 2)
        err = appends[1]["event"]
        assert err["type"] == "error" and "'fake'" in err["message"] and "not configured" in err["message"]
        assert API_KEY not in err["message"]
        await session_status(c, a, sid, "error")
        await call(c, a, {"_": "DeleteModelProvider", "name": "twin"})
        assert secrets() == []   # no provider names it any more
        await c.close(); await c2.close()


async def test_start_up_removes_orphan_state_dirs_and_remakes_missing_ones(tmp_path):
    from seed_agents.server.main import start_server

    a = keypair("A")
    cfg = make_config(tmp_path)
    running = await start_server(cfg)
    try:
        c = await V2Client.open(running.url)
        agent_id, _ = await setup_session(c, a)
        await c.close()
    finally:
        await running.stop()
    agents_dir = tmp_path / "agents"
    kept = agents_dir / agent_id
    (kept / "memory").mkdir(parents=True)
    (kept / "memory" / "note.md").write_text("keep me")
    orphan = agents_dir / "00000000-0000-4000-8000-000000000000"
    (orphan / "memory").mkdir(parents=True)
    stray_file = agents_dir / "README"
    stray_file.write_text("not a directory: left alone")
    # a row whose directory went missing
    from seed_agents.server.database.sqlite.database import Database

    db = Database(cfg.db_path)
    db.start_sync()
    lost = agents_dir / "11111111-1111-4111-8111-111111111111"
    db.write_sync(agents_q.create_agent, lost.name, a.account_id, ECHO, str(lost), 1)
    outside = tmp_path / "elsewhere"
    db.write_sync(agents_q.create_agent, "22222222-2222-4222-8222-222222222222", a.account_id, ECHO,
                  str(outside), 1)
    db.close_sync()
    running = await start_server(cfg)
    try:
        assert not orphan.exists()
        assert (kept / "memory" / "note.md").read_text() == "keep me"
        assert lost.is_dir() and stray_file.exists()
        assert not outside.exists()   # only <data_dir>/agents/ is managed
    finally:
        await running.stop()


async def test_runs_rows_have_the_tree_shape(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, sid = await setup_session(c, a, title="Titled")
    r = await send(c, a, sid, "first line\nsecond")
    run = await wait_for(lambda: _run_when_done(c, a, r["runId"]), "run end")
    assert run["title"] == "Titled" and run["rootRunId"] == run["id"] and run["depth"] == 0
    assert (run["kind"], run["origin"], run["account"]) == ("agent", "user", a.account_id)
    assert run["usage"]["total"] > 0 and run["attempt"] == 1
    assert run["createdAt"] <= run["startedAt"] <= run["finishedAt"] <= run["updatedAt"]
    assert set(run) == {"id", "account", "rootRunId", "depth", "kind", "agentId", "sessionId", "origin",
                        "title", "status", "attempt", "createdAt", "updatedAt", "startedAt", "finishedAt",
                        "usage"}
    await c.close()


async def _run_when_done(c, kp, run_id):
    run = (await call(c, kp, {"_": "GetRun", "runId": run_id}))["run"]
    return run if run["status"] in runs_q.TERMINAL else None

"""At start, statuses a dead process left behind are recomputed from the runs."""
from __future__ import annotations

import uuid

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import accounts, agents, sessions

from tests.conftest import make_config
from tests.wsraw import V2Client, keypair


async def test_a_session_left_streaming_without_runs_is_idle_after_start(tmp_path):
    from seed_agents.server.main import start_server

    a = keypair("A")
    cfg = make_config(tmp_path)
    agent_id, session_id = str(uuid.uuid4()), str(uuid.uuid4())

    def job(conn):
        accounts.ensure_account(conn, a.account_id, 1)
        agents.create_agent(conn, agent_id, a.account_id, {"name": "a", "systemPrompt": "",
                                                            "modelProvider": "echo", "model": "m"}, "/x", 1)
        agents.set_agent_status(conn, agent_id, "running", 2)
        sessions.create_session(conn, session_id, a.account_id, agent_id, None, 1)
        sessions.set_session_status(conn, session_id, "streaming", 2)

    db = Database(cfg.db_path)
    db.start_sync()
    db.write_sync(job)
    db.close_sync()
    running = await start_server(cfg)
    try:
        c = await V2Client.open(running.url)
        got = await c.call(a, {"_": "GetSession", "sessionId": session_id})
        assert got["session"]["status"] == "idle"
        got = await c.call(a, {"_": "GetAgent", "agentId": agent_id})
        assert got["agent"]["status"] == "idle"
        await c.close()
    finally:
        await running.stop()

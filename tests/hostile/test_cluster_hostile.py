"""Hostile input on a PostgreSQL-backed server: text PostgreSQL cannot hold (U+0000) is a clear
400, nothing is half-written, and the server keeps serving."""
from __future__ import annotations

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.cluster.test_cluster_replay import AGENT, servers
from tests.wsraw import V2Client, keypair


async def test_a_nul_character_is_refused_with_400_and_nothing_is_written(tmp_path, postgres_url):
    kp = keypair("nul sender")
    async with servers(tmp_path, postgres_url, 1) as (a,):
        c = await V2Client.open(a.url)
        try:
            async def call(action):
                return await c.request(sign_envelope(kp, action, ts=unique_ts()))

            agent_id = (await call({"_": "CreateAgent", "definition": AGENT}))["agentId"]
            refused = await call({"_": "CreateSession", "agentId": agent_id, "title": "bad\x00title"})
            assert refused["_"] == "Error" and refused["status"] == 400, refused
            assert "U+0000" in refused["message"]
            listed = await call({"_": "ListSessions", "agentId": agent_id})
            assert listed["sessions"] == []   # nothing half-written
            missing = await call({"_": "GetSession", "sessionId": "no\x00such"})
            assert missing["_"] == "Error" and missing["status"] == 400, missing
            made = await call({"_": "CreateSession", "agentId": agent_id, "title": "fine"})
            assert made["_"] == "CreateSessionResponse", made   # still serving
        finally:
            await c.close()

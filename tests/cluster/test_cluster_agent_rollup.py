"""Two servers' turns on one agent, and the agent's activity rollup (store/agents.py; docs/storage.md
"Group commit on PostgreSQL"): each server's writer folds a batch's rollup, touches and status
of the agent and writes its row once, after the batch's last job, so the two servers' batches
meet on that row only at their ends.

What a user would see: once every turn is answered, the agent (GetAgent through either server)
shows what a serial run of the same events leaves: its activity at the latest event, its last
message at the latest message, the kind and sender of the last event (every session ends with
the echo reply), idle and not busy; the agent's `updatedAt` no older than any message sent.
A rollup folded from a stale row (a lost update between the servers) fails it.
"""
from __future__ import annotations

import asyncio
import base64
import os

from seed_agents.protocol.wire.keys import Keypair

from tests.cluster.test_cluster_servers import (LIMITS, WAIT_S, all_events, client, echo_sessions, settled,
                                               start_servers)
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

SESSIONS = 4
CLIENTS_PER_SERVER = 2
ROUNDS = 4      # per client: each round a message to every session, all in flight at once


async def test_two_servers_turns_on_one_agent_leave_the_rollup_of_a_serial_run(
        tmp_path, postgres_url, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SEED_AGENTS_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    servers = await start_servers(tmp_path, 2, ["--storage-url", postgres_url, *LIMITS, "--run-lease", "3"])
    kp = Keypair.generate()
    clients = []
    try:
        agent_id, sessions = await echo_sessions(servers[0], kp, SESSIONS, "s")
        clients = [await client(srv, kp) for srv in servers for _ in range(CLIENTS_PER_SERVER)]

        async def turns(k: int) -> None:
            order = sessions[k % SESSIONS:] + sessions[:k % SESSIONS]
            for r in range(ROUNDS):
                await asyncio.gather(*(clients[k].message_session(sid, f"c{k} r{r} {sid[:8]}") for sid in order))

        await asyncio.wait_for(asyncio.gather(*(turns(k) for k in range(len(clients)))), WAIT_S * 4)

        async with await client(servers[1], kp) as reader:
            final = await settled(reader, sessions, "two servers' turns")
            events = [e for sid in sessions
                      for e in (final[sid] if len(final[sid]) < 500 else await all_events(reader, sid))]
            messages = [e for e in events if e["event"].get("type") == "message"
                        and e["event"].get("role") in ("user", "assistant") and e["event"].get("actor") != "system"]
            last_kinds = {final[sid][-1]["event"]["type"] for sid in sessions}
            assert last_kinds == {"message"} and {final[sid][-1]["event"]["role"] for sid in sessions} == {"assistant"}
            seen = [(await c.get_agent(agent_id))["agent"] for c in (reader, clients[0])]
        for agent in seen:
            activity = agent["activity"]
            assert activity["at"] == max(e["createdAt"] for e in events)
            assert activity["messageAt"] == max(e["createdAt"] for e in messages)
            assert activity["kind"] == "message" and activity["messageFrom"] == "assistant"
            assert activity["sessionId"] in sessions
            assert agent["status"] == "idle" and agent["busy"] is False
            users = [e["createdAt"] for e in messages if e["event"]["role"] == "user"]
            assert len(users) == len(clients) * ROUNDS * SESSIONS
            assert agent["updatedAt"] >= max(users)
        assert seen[0] == seen[1]
    finally:
        for c in clients:
            await c.close()
        for srv in servers:
            srv.kill()

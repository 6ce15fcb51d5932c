"""Group commit across servers (server/database/postgres/database.py, docs/storage.md "Group commit
on PostgreSQL"): three servers on one PostgreSQL database, each with many writes in flight at
once (so its writer commits them in batches), all aimed at the same few sessions and the same
agent, each writer crossing the sessions in its own order, so batches of different servers want
the same session and agent rows in opposite orders.

What a user would see: every write that was answered is there exactly once (a MessageSession
retried on another server with its clientMessageId is applied once; a CreateSession retried with
its clientRequestId makes one session), every session's seqs are dense, every user message is
answered once, and no call failed (no deadlock or serialization error reached a client).
"""
from __future__ import annotations

import asyncio
import base64
import os
import random
from collections import Counter

from seed_agents.protocol.wire.keys import Keypair

from tests.cluster.test_cluster_servers import (LIMITS, WAIT_S, all_events, client, echo_sessions, settled,
                                               start_servers)
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

SESSIONS = 3
CLIENTS_PER_SERVER = 3
ROUNDS = 4      # per client: each round a message to every session (in the client's order)


async def test_three_servers_writing_to_the_same_sessions_lose_and_repeat_nothing(
        tmp_path, postgres_url, monkeypatch):  # noqa: F811
    seed = int(os.environ.get("SEED_AGENTS_TEST_SEED") or random.randrange(1 << 32))
    print(f"seed {seed} (SEED_AGENTS_TEST_SEED={seed} replays it)")
    rng = random.Random(seed)
    monkeypatch.setenv("SEED_AGENTS_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    servers = await start_servers(tmp_path, 3, ["--storage-url", postgres_url, *LIMITS, "--run-lease", "3"])
    kp = Keypair.generate()
    clients = []
    try:
        agent_id, sessions = await echo_sessions(servers[0], kp, SESSIONS, "shared ")
        clients = [await client(srv, kp) for srv in servers for _ in range(CLIENTS_PER_SERVER)]
        orders = [rng.sample(range(SESSIONS), SESSIONS) for _ in clients]
        sent: list[str] = []
        created: dict[str, str] = {}

        async def hammer(k: int) -> None:
            c, other = clients[k], clients[(k + CLIENTS_PER_SERVER) % len(clients)]   # another server
            for r in range(ROUNDS):
                calls = []
                for s in orders[k]:
                    text = f"c{k} r{r} s{s}"
                    calls.append(c.message_session(sessions[s], text, client_message_id=f"{seed}-{k}-{r}-{s}"))
                    sent.append(text)
                request = f"{seed}-create-{k}-{r}"
                calls.append(c.create_session(agent_id, title=f"made {k} {r}", client_request_id=request))
                calls.append(c.update_session(sessions[orders[k][0]], title=f"title {k} {r}"))
                answers = await asyncio.gather(*calls)   # a failed call fails the test
                created[request] = answers[SESSIONS]["sessionId"]
                # The same writes again through another server: applied once, answered the same.
                s = orders[k][-1]
                again = await other.message_session(sessions[s], f"c{k} r{r} s{s}",
                                                    client_message_id=f"{seed}-{k}-{r}-{s}")
                assert again["runId"] == answers[SESSIONS - 1]["runId"]
                twice = await other.create_session(agent_id, title=f"made {k} {r}", client_request_id=request)
                assert twice["sessionId"] == created[request]

        await asyncio.wait_for(asyncio.gather(*(hammer(k) for k in range(len(clients)))), WAIT_S * 4)

        async with await client(servers[2], kp) as reader:
            final = await settled(reader, sessions, f"seed {seed}")
            users = Counter()
            for sid in sessions:
                events = final[sid] if len(final[sid]) < 500 else await all_events(reader, sid)
                assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), f"seed {seed}: {sid}"
                users.update(e["event"]["content"] for e in events if e["event"].get("role") == "user")
            assert users == Counter(sent), f"seed {seed}: each answered message once"
            listed = (await reader.list_sessions(agent_id, limit=200))["sessions"]
            made = [x for x in listed if x["title"].startswith("made ")]
            assert sorted(x["id"] for x in made) == sorted(created.values()), f"seed {seed}: one session per request"
    finally:
        for c in clients:
            await c.close()
        for srv in servers:
            srv.kill()

"""Replaying a 100,000-event session to a client that reads slowly keeps server memory
bounded: the replay is read in pages and paced by the socket, never loaded whole."""
from __future__ import annotations

import asyncio
import uuid

from websockets.asyncio.client import connect

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import accounts, agents, events, sessions

from tests.conftest import make_config
from tests.wsraw import keypair, rss_bytes

N = 100_000



def populate(db_path: str, account_id: str, n: int) -> str:
    db = Database(db_path)
    db.start_sync()
    agent_id, session_id = str(uuid.uuid4()), str(uuid.uuid4())

    def job(conn):
        accounts.ensure_account(conn, account_id, 1)
        agents.create_agent(conn, agent_id, account_id, {"name": "a", "systemPrompt": "",
                                                          "modelProvider": "echo", "model": "m"}, "/tmp/x", 1)
        sessions.create_session(conn, session_id, account_id, agent_id, None, 1)
        text = "x" * 300
        for i in range(n):
            events.append_event(conn, session_id, {"type": "message", "role": "user", "content": text},
                                str(uuid.uuid4()), 1 + i)

    db.write_sync(job)
    db.close_sync()
    return session_id


async def test_slow_replay_of_100k_events_stays_bounded(tmp_path):
    from seed_agents.server.main import start_server

    a = keypair("A")
    cfg = make_config(tmp_path)
    session_id = await asyncio.to_thread(populate, cfg.db_path, a.account_id, N)
    running = await start_server(cfg)
    try:
        base = rss_bytes()
        peak = base
        async with connect(running.url, subprotocols=["seed-agents.v2"], max_size=None, max_queue=1) as ws:
            key = f"sessions/{session_id}"
            env = build_envelope(a, {"_": "Subscribe", "key": key})
            await ws.send(dagcbor.encode({"id": 1, "envelope": env}))
            expected, done = 1, False
            async with asyncio.timeout(120):
                while not done:
                    frame = dagcbor.decode(await ws.recv(), max_size=1 << 30, max_items=None)
                    for event in frame.get("events", [frame["event"]] if "event" in frame else []):
                        assert event["seq"] == expected
                        expected += 1
                    if frame.get("_") == "replayed":
                        assert frame["seq"] == N
                        done = True
                    peak = max(peak, rss_bytes())
                    await asyncio.sleep(0.005)   # a slow reader
        assert expected == N + 1
        growth = peak - base
        print(f"replay of {N} events: RSS growth {growth / 1e6:.1f} MB")
        assert growth < 100 * 1024 * 1024, f"RSS grew by {growth / 1e6:.1f} MB during the replay"
    finally:
        await running.stop()

"""Setup steps that write straight into a database file BEFORE the server starts (not timed):
an agent, sessions and their events for one account, in one big transaction, through the
store's own functions (seed_agents.server.store.*), so the file is exactly what the server would write."""
from __future__ import annotations

import os
import time
import uuid

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import codec
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q

DEFINITION = {"name": "bench", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


def payload(content_chars: int, i: int) -> dict:
    text = (f"event {i}: " + "lorem ipsum dolor sit amet " * (content_chars // 27 + 1))[:content_chars]
    return {"type": "message", "role": "assistant" if i % 2 else "user", "content": text,
            "meta": {"provider": "echo", "model": "echo-1", "durationMs": 3}}


def build(data_dir: str, account_id: str, sessions: dict[str, tuple[int, int]]) -> dict:
    """Create `data_dir/agents.sqlite` with one echo agent of `account_id` and, for each
    name -> (events, content chars), a session holding that many events.
    Returns {"agentId", "sessions": {name: sessionId}, "event_bytes": {name: mean body bytes},
    "seconds"}."""
    os.makedirs(data_dir, exist_ok=True)
    started = time.perf_counter()
    db = Database(os.path.join(data_dir, "agents.sqlite"))
    db.start_sync()
    agent_id = str(uuid.uuid4())
    now = int(time.time() * 1000) - 60_000
    ids = {name: str(uuid.uuid4()) for name in sessions}

    def job(conn):
        agents_q.create_agent(conn, agent_id, account_id, DEFINITION,
                              os.path.join(data_dir, "agents", agent_id), now)
        sizes = {}
        for name, (count, chars) in sessions.items():
            sid = ids[name]
            sessions_q.create_session(conn, sid, account_id, agent_id, name, now)
            # The first events through the store's own append (seq counter and all); the bulk of
            # a large session as the same bodies inserted with executemany, then the counter set.
            total = 0
            head = min(count, 100)
            for i in range(1, head + 1):
                _event, body = events_q.append_event(conn, sid, payload(chars, i), str(uuid.uuid4()), now)
                total += len(body)
            rows = []
            for i in range(head + 1, count + 1):
                event_id = str(uuid.uuid4())
                body = codec.encode({"id": event_id, "sessionId": sid, "seq": i,
                                     "event": payload(chars, i), "createdAt": now})
                total += len(body)
                rows.append((sid, i, event_id, now, body))
            if rows:
                conn.executemany("INSERT INTO session_events (session_id, seq, id, created_at, body)"
                                 " VALUES (?, ?, ?, ?, ?)", rows)
                conn.execute("UPDATE sessions SET last_seq = ? WHERE id = ?", (count, sid))
            assert events_q.last_seq(conn, sid) == count
            sizes[name] = round(total / count, 1) if count else 0
        return sizes

    try:
        sizes = db.write_sync(job)
    finally:
        db.close_sync()
    return {"agentId": agent_id, "sessions": ids, "event_bytes": sizes,
            "seconds": round(time.perf_counter() - started, 2)}

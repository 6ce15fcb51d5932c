"""Setup steps that write straight into a database file BEFORE the server starts (not timed):
an agent, sessions and their events for one account, in one big transaction, through the
store's own functions (seed_agents.server.store.*), so the file is exactly what the server would write.

`build(..., interleave=N)` writes the events as a live server does instead: N more sessions as
large as the largest, and every session's turns (two events) taking turns with the others', each
event linked as it is appended. A table whose rows follow the order of the appends (a rowid
table) then holds a session's events spread among the others', where one big transaction per
session put them side by side: the cold replay reads them so (docs/performance.md, "The cold
replay in each layout")."""
from __future__ import annotations

import json
import os
import sys
import time
import uuid

from seed_agents.protocol.api import history

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


def build(data_dir: str, account_id: str, sessions: dict[str, tuple[int, int]], interleave: int = 0) -> dict:
    """Create `data_dir/agents.sqlite` with one echo agent of `account_id` and, for each
    name -> (events, content chars), a session holding that many events (with `interleave`,
    as the module says).
    Returns {"agentId", "sessions": {name: sessionId}, "event_bytes": {name: mean body bytes},
    "seconds"}."""
    os.makedirs(data_dir, exist_ok=True)
    started = time.perf_counter()
    db = Database(os.path.join(data_dir, "agents.sqlite"))
    db.start_sync()
    agent_id = str(uuid.uuid4())
    now = int(time.time() * 1000) - 60_000
    ids = {name: str(uuid.uuid4()) for name in sessions}
    if interleave:
        largest = max(sessions.values())
        sessions = {**sessions, **{f"filler {i}": largest for i in range(interleave)}}
        ids.update({name: str(uuid.uuid4()) for name in sessions if name not in ids})

    def taking_turns(conn):
        agents_q.create_agent(conn, agent_id, account_id, DEFINITION,
                              os.path.join(data_dir, "agents", agent_id), now)
        for name in sessions:
            sessions_q.create_session(conn, ids[name], account_id, agent_id, name, now)
        prev: dict[str, bytes | None] = {sid: None for sid in ids.values()}
        totals = dict.fromkeys(sessions, 0)
        rows = []
        turns = max(count for count, _ in sessions.values()) // 2 + 1
        for turn in range(turns):
            for name, (count, chars) in sessions.items():
                sid = ids[name]
                for i in (2 * turn + 1, 2 * turn + 2):
                    if i > count:
                        continue
                    event_id = str(uuid.uuid4())
                    body = codec.encode({"id": event_id, "sessionId": sid, "seq": i,
                                         "event": payload(chars, i), "createdAt": now})
                    prev[sid] = history.link(sid, i, prev[sid], body, now)   # as append_event links it
                    totals[name] += len(body)
                    rows.append((sid, i, event_id, now, body, prev[sid]))
            if len(rows) >= 10_000 or turn == turns - 1:
                conn.executemany("INSERT INTO session_events (session_id, seq, id, created_at, body, link)"
                                 " VALUES (?, ?, ?, ?, ?, ?)", rows)
                rows.clear()
        for name, (count, _chars) in sessions.items():
            conn.execute("UPDATE sessions SET last_seq = ? WHERE id = ?", (count, ids[name]))
            assert events_q.last_seq(conn, ids[name]) == count
        return {name: round(totals[name] / count, 1) if count else 0 for name, (count, _) in sessions.items()}

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
        sizes = db.write_sync(taking_turns if interleave else job)
    finally:
        db.close_sync()
    return {"agentId": agent_id, "sessions": ids, "event_bytes": sizes,
            "seconds": round(time.perf_counter() - started, 2)}


if __name__ == "__main__":
    # `python -m bench.dbsetup DATA_DIR ACCOUNT SESSIONS_JSON INTERLEAVE`: a tree's own build, for a
    # benchmark that gives each tree its own file (bench.v1_ab --own-data); prints build()'s answer.
    built = build(sys.argv[1], sys.argv[2], {k: tuple(v) for k, v in json.loads(sys.argv[3]).items()},
                  int(sys.argv[4]))
    print(json.dumps(built))

"""SIGKILL during DeleteAgent and DeleteSession: after a restart the state is wholly before or
wholly after the deletion, never half-deleted, and the file passes its integrity check. The
server is a child process (tests/procs.py)."""
from __future__ import annotations

import asyncio
import os
import uuid

import apsw
import pytest

from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import accounts, agents, events, runs, sessions

from tests.procs import ServerProcess
from tests.wsraw import V2, keypair

SESSIONS = 40
EVENTS = 60   # per session: enough rows that the delete transaction takes a moment


def prefill(data_dir, account_id: str) -> dict:
    """An agent with many sessions, events and runs, written before the server starts."""
    db = Database(str(data_dir / "agents.sqlite"))
    db.start_sync()
    agent_id = str(uuid.uuid4())
    state_dir = data_dir / "agents" / agent_id
    (state_dir / "memory").mkdir(parents=True)
    session_ids = [str(uuid.uuid4()) for _ in range(SESSIONS)]

    def job(conn):
        accounts.ensure_account(conn, account_id, 1)
        agents.create_agent(conn, agent_id, account_id, {"name": "big", "systemPrompt": "",
                                                          "modelProvider": "echo", "model": "m"},
                            str(state_dir), 1)
        for sid in session_ids:
            sessions.create_session(conn, sid, account_id, agent_id, "s", 2)
            for i in range(EVENTS):
                payload = {"type": "message", "role": "user", "content": "x" * 200 + str(i)}
                events.append_event(conn, sid, payload, str(uuid.uuid4()), 3)
            run_id = str(uuid.uuid4())
            runs.create_run(conn, run_id, account_id, agent_id, sid, None, 4)
            runs.set_run_status(conn, run_id, "running", 5)
            runs.set_run_status(conn, run_id, "succeeded", 6)

    db.write_sync(job)
    db.close_sync()
    return {"agent": agent_id, "sessions": session_ids, "state_dir": state_dir}


def counts(path, agent_id: str, session_id: str) -> dict:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        q = lambda sql, *p: conn.execute(sql, p).fetchone()[0]  # noqa: E731
        return {
            "integrity": q("PRAGMA integrity_check"),
            "agent": q("SELECT count(*) FROM agents WHERE id = ?", agent_id),
            "sessions": q("SELECT count(*) FROM sessions WHERE agent_id = ?", agent_id),
            "events": q("SELECT count(*) FROM session_events e JOIN sessions s ON s.id = e.session_id"
                        " WHERE s.agent_id = ?", agent_id),
            "runs": q("SELECT count(*) FROM runs WHERE agent_id = ?", agent_id),
            "session": q("SELECT count(*) FROM sessions WHERE id = ?", session_id),
            "session_events": q("SELECT count(*) FROM session_events WHERE session_id = ?", session_id),
            "detached_runs": q("SELECT count(*) FROM runs WHERE agent_id = ? AND session_id IS NULL", agent_id),
        }
    finally:
        conn.close()


async def kill_during(srv: ServerProcess, kp, action: dict, delay: float) -> None:
    """Send `action` and SIGKILL the server `delay` seconds later, answered or not."""
    from websockets.asyncio.client import connect

    from seed_agents.protocol.wire import dagcbor

    async with connect(srv.url, subprotocols=[V2], max_size=None) as ws:
        await ws.send(dagcbor.encode({"id": 1, "envelope": build_envelope(kp, action)}))
        await asyncio.sleep(delay)
        srv.kill()


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05])
async def test_sigkill_during_delete_agent(tmp_path, delay):
    a = keypair("A")
    data = tmp_path / "srv"
    data.mkdir()
    made = prefill(data, a.account_id)
    db = data / "agents.sqlite"
    before = counts(db, made["agent"], made["sessions"][0])
    assert before["sessions"] == SESSIONS and before["events"] == SESSIONS * EVENTS
    srv = ServerProcess(data).start()
    try:
        await kill_during(srv, a, {"_": "DeleteAgent", "agentId": made["agent"]}, delay)
        srv.start()   # start-up reconciles the state directory with the rows
        srv.kill()
    finally:
        srv.kill()
    after = counts(db, made["agent"], made["sessions"][0])
    assert after["integrity"] == "ok"
    gone = {**before, "agent": 0, "sessions": 0, "events": 0, "runs": 0, "session": 0, "session_events": 0,
            "detached_runs": 0}
    assert after in (before, gone), after
    assert os.path.isdir(made["state_dir"]) == (after == before)


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05])
async def test_sigkill_during_delete_session(tmp_path, delay):
    a = keypair("A")
    data = tmp_path / "srv"
    data.mkdir()
    made = prefill(data, a.account_id)
    db = data / "agents.sqlite"
    target = made["sessions"][0]
    before = counts(db, made["agent"], target)
    srv = ServerProcess(data).start()
    try:
        await kill_during(srv, a, {"_": "DeleteSession", "sessionId": target}, delay)
        srv.start()
        srv.kill()
    finally:
        srv.kill()
    after = counts(db, made["agent"], target)
    assert after["integrity"] == "ok"
    gone = {**before, "sessions": SESSIONS - 1, "events": (SESSIONS - 1) * EVENTS, "session": 0,
            "session_events": 0, "detached_runs": 1}
    assert after in (before, gone), after
    assert os.path.isdir(made["state_dir"])

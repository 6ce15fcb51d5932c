"""Agents, sessions (keyset-paged lists) and session events (dense seq, stored bodies)."""
from __future__ import annotations

import apsw
import pytest

from protocol import dagcbor
from server.store import agents, events, sessions
from server.store.errors import InvalidCursor, NotFound

ACCOUNT = "z6MkAccount"
DEFINITION = {"name": "helper", "systemPrompt": "Be brief.", "modelProvider": "echo", "model": "m"}


def test_agent_lifecycle(conn):
    info = agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/data/agents/a1", 10)
    assert info == {"id": "a1", "account": ACCOUNT, "definition": DEFINITION, "stateDir": "/data/agents/a1",
                    "status": "idle", "createdAt": 10, "updatedAt": 10}
    assert agents.get_agent(conn, "a1") == info
    assert agents.get_agent(conn, "nope") is None
    assert agents.set_agent_status(conn, "a1", "running", 20)["status"] == "running"
    with pytest.raises(NotFound):
        agents.set_agent_status(conn, "nope", "running", 20)
    with pytest.raises(apsw.ConstraintError):  # the contract's statuses only
        agents.set_agent_status(conn, "a1", "sleeping", 20)


def test_list_agents_newest_update_first(conn):
    for i, agent_id in enumerate(["a", "b", "c"]):
        agents.create_agent(conn, agent_id, ACCOUNT, DEFINITION, f"/d/{agent_id}", 10 + i)
    agents.create_agent(conn, "other", "z6MkOther", DEFINITION, "/d/o", 50)
    assert agents.touch_agent(conn, "a", 30)["updatedAt"] == 30
    assert agents.touch_agent(conn, "b", 5)["updatedAt"] == 11  # an earlier clock never moves it back
    with pytest.raises(NotFound):
        agents.touch_agent(conn, "nope", 40)
    assert [a["id"] for a in agents.list_agents(conn, ACCOUNT)] == ["a", "c", "b"]


def test_session_info_omits_missing_title(conn):
    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    untitled = sessions.create_session(conn, "s1", ACCOUNT, "a1", None, 10)
    assert untitled == {"id": "s1", "account": ACCOUNT, "agentId": "a1", "status": "idle",
                        "createdAt": 10, "updatedAt": 10}
    titled = sessions.create_session(conn, "s2", ACCOUNT, "a1", "Hello", 11)
    assert titled["title"] == "Hello"
    assert sessions.get_session(conn, "s1") == untitled and sessions.get_session(conn, "s2") == titled
    assert sessions.set_session_status(conn, "s1", "streaming", 12)["status"] == "streaming"
    with pytest.raises(NotFound):
        sessions.set_session_status(conn, "nope", "idle", 12)
    with pytest.raises(apsw.ConstraintError):  # the agent must exist
        sessions.create_session(conn, "s3", ACCOUNT, "no-agent", None, 13)


def _page_through(conn, agent_id, limit):
    seen, cursor = [], None
    while True:
        page, cursor = sessions.list_sessions(conn, ACCOUNT, agent_id, limit, cursor)
        assert len(page) <= limit
        seen += [s["id"] for s in page]
        if cursor is None:
            return seen


def test_list_sessions_pages_without_repeats_or_gaps(conn):
    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    agents.create_agent(conn, "a2", ACCOUNT, DEFINITION, "/d", 1)
    expected_all = []
    for i in range(23):  # many share one updated_at, so the id tie-break matters
        sessions.create_session(conn, f"s{i:02}", ACCOUNT, "a1" if i % 3 else "a2", None, 100 + i // 4)
    sessions.create_session(conn, "foreign", "z6MkOther", "a1", None, 500)
    rows = conn.execute("SELECT id, agent_id FROM sessions WHERE account_id = ? ORDER BY updated_at DESC, id",
                        (ACCOUNT,)).fetchall()
    expected_all = [r[0] for r in rows]
    for limit in (1, 4, 5, 23, 100):
        assert _page_through(conn, None, limit) == expected_all
        assert _page_through(conn, "a2", limit) == [r[0] for r in rows if r[1] == "a2"]
    page, cursor = sessions.list_sessions(conn, ACCOUNT, None, 23, None)
    assert len(page) == 23 and cursor is None


def test_bad_cursor_is_invalid_cursor(conn):
    for bad in ("!!!", "bm9jb2xvbg", ""):
        with pytest.raises(InvalidCursor):
            sessions.list_sessions(conn, ACCOUNT, None, 10, bad)


def test_sessions_of_agent(conn):
    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    for i in range(5):
        sessions.create_session(conn, f"s{i}", ACCOUNT, "a1", None, 10 + i)
    assert [s["id"] for s in sessions.sessions_of_agent(conn, "a1", 3)] == ["s4", "s3", "s2"]


def test_append_event_dense_seq_and_stored_body(conn):
    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    sessions.create_session(conn, "s1", ACCOUNT, "a1", None, 10)
    sessions.create_session(conn, "s2", ACCOUNT, "a1", None, 10)
    payload = {"type": "message", "role": "user", "content": "hi", "meta": {"accountId": ACCOUNT}}
    appended = []
    for i in range(5):
        appended.append(events.append_event(conn, "s1", payload, f"e{i}", 20 + i))
    events.append_event(conn, "s2", payload, "other", 30)
    event, body = appended[0]
    assert event == {"id": "e0", "sessionId": "s1", "seq": 1, "event": payload, "createdAt": 20}
    assert body == dagcbor.encode(event)
    assert [e["seq"] for e, _ in appended] == [1, 2, 3, 4, 5]
    assert events.last_seq(conn, "s1") == 5 and events.last_seq(conn, "s2") == 1
    assert events.last_seq(conn, "nope") == 0
    assert sessions.get_session(conn, "s1")["updatedAt"] == 24
    assert events.events_after(conn, "s1", 2, 2) == [appended[2][0], appended[3][0]]
    assert events.event_bodies_after(conn, "s1", 3, 100) == [(4, appended[3][1]), (5, appended[4][1])]
    assert events.events_after(conn, "s1", 5, 10) == []
    with pytest.raises(NotFound):
        events.append_event(conn, "nope", payload, "e-x", 40)
    with pytest.raises(apsw.ConstraintError):  # event ids are unique
        events.append_event(conn, "s2", payload, "e0", 40)

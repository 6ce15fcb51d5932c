"""Agents, sessions (keyset-paged lists) and session events (dense seq, stored bodies)."""
from __future__ import annotations

import apsw
import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.server.store import agents, events, sessions
from seed_agents.server.store.errors import InvalidCursor, NotFound

ACCOUNT = "z6MkAccount"
DEFINITION = {"name": "helper", "systemPrompt": "Be brief.", "modelProvider": "echo", "model": "m"}


def test_agent_lifecycle(conn):
    info = agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/data/agents/a1", 10)
    assert info == {"id": "a1", "account": ACCOUNT, "definition": DEFINITION, "stateDir": "/data/agents/a1",
                    "status": "idle", "createdAt": 10, "updatedAt": 10, "accessRole": "owner",
                    "publicRead": False, "busy": False}
    assert agents.get_agent(conn, "a1") == info
    assert agents.get_agent(conn, "a1", "reader")["accessRole"] == "reader"
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
                        "createdAt": 10, "updatedAt": 10}   # no activity before the first message
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
    rows = conn.execute("SELECT id, agent_id FROM sessions WHERE account_id = ? ORDER BY updated_at DESC, id DESC",
                        (ACCOUNT,)).fetchall()
    expected_all = [r[0] for r in rows]
    for limit in (1, 4, 5, 23, 100):
        assert _page_through(conn, None, limit) == expected_all
        assert _page_through(conn, "a2", limit) == [r[0] for r in rows if r[1] == "a2"]
    page, cursor = sessions.list_sessions(conn, ACCOUNT, None, 23, None)
    assert len(page) == 23 and cursor is None


def test_bad_cursor_is_invalid_cursor(conn):
    for bad in ({}, {"updatedBefore": "1", "idBefore": "s"}, {"updatedBefore": 1, "idBefore": 2}):
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


def test_activity_rollup_moves_with_every_event_and_messages_only_with_messages(conn):
    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    sessions.create_session(conn, "s1", ACCOUNT, "a1", None, 10)
    sessions.create_session(conn, "s2", ACCOUNT, "a1", None, 10)
    assert "activity" not in agents.get_agent(conn, "a1")     # NULL until the first event
    assert "activity" not in sessions.get_session(conn, "s1")
    events.append_event(conn, "s1", {"type": "message", "role": "user", "content": "hi"}, "e1", 20)
    assert agents.get_agent(conn, "a1")["activity"] == {"at": 20, "kind": "message", "sessionId": "s1",
                                                        "messageAt": 20, "messageFrom": "user"}
    assert sessions.get_session(conn, "s1")["activity"] == {"messageAt": 20, "messageFrom": "user"}
    events.append_event(conn, "s1", {"type": "message", "role": "assistant", "content": "yo"}, "e2", 25)
    assert sessions.get_session(conn, "s1")["activity"] == {"messageAt": 25, "messageFrom": "assistant"}
    # an error in another session moves at/kind only
    events.append_event(conn, "s2", {"type": "error", "message": "boom"}, "e3", 30)
    assert agents.get_agent(conn, "a1")["activity"] == {"at": 30, "kind": "error", "sessionId": "s1",
                                                        "messageAt": 25, "messageFrom": "assistant"}
    assert "activity" not in sessions.get_session(conn, "s2")
    # a clock step backwards never moves the marks back
    events.append_event(conn, "s2", {"type": "message", "role": "user", "content": "again"}, "e4", 5)
    activity = agents.get_agent(conn, "a1")["activity"]
    assert activity["at"] == 30 and activity["messageAt"] == 25 and activity["sessionId"] == "s2"
    assert [a.get("activity", {}).get("kind") for a in agents.list_agents(conn, ACCOUNT)] == ["message"]


def test_busy_follows_the_agents_queued_and_running_runs(conn):
    from seed_agents.server.store import runs

    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    agents.create_agent(conn, "a2", ACCOUNT, DEFINITION, "/d2", 1)
    sessions.create_session(conn, "s1", ACCOUNT, "a1", None, 10)
    runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", None, 11)
    assert agents.get_agent(conn, "a1")["busy"] is True and agents.get_agent(conn, "a2")["busy"] is False
    runs.set_run_status(conn, "r1", "running", 12)
    assert agents.set_agent_status(conn, "a1", "running", 12)["busy"] is True
    runs.set_run_status(conn, "r1", "succeeded", 13)
    assert agents.set_agent_status(conn, "a1", "idle", 13)["busy"] is False
    assert [a["busy"] for a in agents.list_agents(conn, ACCOUNT)] == [False, False]


def test_titles_overrides_and_detaching_deletion(conn):
    from seed_agents.server.store import runs

    agents.create_agent(conn, "a1", ACCOUNT, DEFINITION, "/d", 1)
    sessions.create_session(conn, "s1", ACCOUNT, "a1", None, 10)
    sessions.create_session(conn, "kid", ACCOUNT, "a1", None, 11, parent_session_id="s1")
    assert sessions.get_session(conn, "s1")["childSessionCount"] == 1
    assert sessions.title_from_text("\n   \n  " + "y" * 70 + " \nmore") == "y" * 60
    assert sessions.auto_title(conn, "s1", "auto", 12)["title"] == "auto"
    assert sessions.auto_title(conn, "s1", "again", 13) is None   # never replaces a title
    user = sessions.update_session(conn, "kid", 14, title="mine")
    assert user["title"] == "mine"
    conn.execute("UPDATE sessions SET title = NULL WHERE id = 'kid'")   # even an emptied user title
    assert sessions.auto_title(conn, "kid", "auto", 15) is None
    override = {"provider": "p", "model": "m"}
    assert sessions.update_session(conn, "s1", 16, set_override=True, model_override=override)["modelOverride"] == override
    assert sessions.update_session(conn, "s1", 17, title="t")["modelOverride"] == override
    assert "modelOverride" not in sessions.update_session(conn, "s1", 18, set_override=True)
    events.append_event(conn, "s1", {"type": "message", "role": "user", "content": "x"}, "e1", 19)
    runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 19)
    sessions.delete_session(conn, "s1")
    assert sessions.get_session(conn, "s1") is None
    assert "parentSessionId" not in sessions.get_session(conn, "kid")
    assert "sessionId" not in runs.get_run(conn, "r1")
    assert events.events_after(conn, "s1", 0, 10) == []
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []

"""Runs: the queue, status changes, restart recovery and the session status they imply."""
from __future__ import annotations

import pytest

from server.store import agents, runs, sessions
from server.store.errors import NotFound
from server.store.gate import open_database

ACCOUNT = "z6MkAccount"


@pytest.fixture
def conn(tmp_path):
    c = open_database(str(tmp_path / "db.sqlite"))
    agents.create_agent(c, "a1", ACCOUNT, {"name": "x"}, "/d", 1)
    sessions.create_session(c, "s1", ACCOUNT, "a1", None, 1)
    sessions.create_session(c, "s2", ACCOUNT, "a1", None, 1)
    yield c
    c.close()


def test_create_and_get_run(conn):
    info = runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 10)
    assert info == {"id": "r1", "agentId": "a1", "sessionId": "s1", "status": "queued", "attempt": 0,
                    "createdAt": 10, "updatedAt": 10}
    assert runs.get_run(conn, "r1") == info
    assert runs.get_run(conn, "nope") is None
    no_session = runs.create_run(conn, "r2", ACCOUNT, "a1", None, None, 11)
    assert "sessionId" not in no_session and runs.get_run(conn, "r2") == no_session


def test_set_run_status_error_and_attempts(conn):
    runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 10)
    running = runs.set_run_status(conn, "r1", "running", 11, attempt_inc=True)
    assert (running["status"], running["attempt"], running["updatedAt"]) == ("running", 1, 11)
    failed = runs.set_run_status(conn, "r1", "failed", 12, error="provider timed out")
    assert failed["error"] == "provider timed out" and failed["attempt"] == 1
    again = runs.set_run_status(conn, "r1", "running", 13, attempt_inc=True)
    assert "error" not in again and again["attempt"] == 2
    with pytest.raises(NotFound):
        runs.set_run_status(conn, "nope", "running", 13)


def test_queue_is_fifo_even_within_one_millisecond(conn):
    for i in range(5):
        runs.create_run(conn, f"r{i}", ACCOUNT, "a1", "s1", f"e{i}", 10)  # same ms
    runs.create_run(conn, "r-early", ACCOUNT, "a1", "s2", None, 5)
    runs.set_run_status(conn, "r2", "running", 11)
    queued = runs.queued_runs(conn, 10)
    assert [r["id"] for r in queued] == ["r-early", "r0", "r1", "r3", "r4"]
    assert queued[1]["accountId"] == ACCOUNT and queued[1]["userEventId"] == "e0"
    assert "userEventId" not in queued[0]
    assert [r["id"] for r in runs.queued_runs(conn, 2)] == ["r-early", "r0"]


def test_session_runs_and_status(conn):
    assert runs.session_status_from_runs(conn, "s1") == "idle"
    assert runs.latest_run_of_session(conn, "s1") is None
    runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 10)
    runs.create_run(conn, "r2", ACCOUNT, "a1", "s1", "e2", 10)
    assert runs.session_status_from_runs(conn, "s1") == "streaming"
    assert runs.latest_run_of_session(conn, "s1")["id"] == "r2"
    runs.set_run_status(conn, "r1", "running", 11)
    assert [r["id"] for r in runs.active_runs_of_session(conn, "s1")] == ["r1", "r2"]
    runs.set_run_status(conn, "r1", "succeeded", 12)
    runs.set_run_status(conn, "r2", "failed", 13, error="boom")
    assert runs.active_runs_of_session(conn, "s1") == []
    assert runs.session_status_from_runs(conn, "s1") == "error"
    runs.create_run(conn, "r3", ACCOUNT, "a1", "s1", "e3", 14)
    assert runs.session_status_from_runs(conn, "s1") == "streaming"
    runs.set_run_status(conn, "r3", "canceled", 15)
    assert runs.session_status_from_runs(conn, "s1") == "idle"
    assert runs.session_status_from_runs(conn, "s2") == "idle"


def test_requeue_interrupted(conn):
    for i in range(4):
        runs.create_run(conn, f"r{i}", ACCOUNT, "a1", "s1", None, 10 + i)
    runs.set_run_status(conn, "r2", "running", 20, attempt_inc=True)
    runs.set_run_status(conn, "r0", "running", 20, attempt_inc=True)
    runs.set_run_status(conn, "r1", "succeeded", 21)
    assert runs.requeue_interrupted(conn, 30) == ["r0", "r2"]
    assert runs.get_run(conn, "r0")["status"] == "queued" and runs.get_run(conn, "r0")["attempt"] == 1
    assert runs.get_run(conn, "r1")["status"] == "succeeded"
    assert runs.requeue_interrupted(conn, 31) == []


def test_queued_runs_of_session_and_cancel(conn):
    for i in range(4):
        runs.create_run(conn, f"r{i}", ACCOUNT, "a1", "s1", f"e{i}", 10)
    runs.create_run(conn, "other", ACCOUNT, "a1", "s2", None, 9)
    runs.set_run_status(conn, "r0", "running", 11)
    queued = runs.queued_runs_of_session(conn, "s1", 10)
    assert [r["id"] for r in queued] == ["r1", "r2", "r3"] and queued[0]["userEventId"] == "e1"
    assert [r["id"] for r in runs.queued_runs_of_session(conn, "s1", 1)] == ["r1"]
    canceled = runs.cancel_queued_runs_of_session(conn, "s1", 12)
    assert sorted(r["id"] for r in canceled) == ["r1", "r2", "r3"]
    assert all(r["status"] == "canceled" and r["updatedAt"] == 12 for r in canceled)
    assert runs.get_run(conn, "r0")["status"] == "running"   # the live run is the runtime's to stop
    assert runs.get_run(conn, "other")["status"] == "queued"

"""Runs: the queue, status changes, restart recovery and the session status they imply."""
from __future__ import annotations

import pytest

from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.store import agents, runs, sessions
from seed_agents.server.store.errors import NotFound

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
    info = runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 10, title="hello")
    assert info == {"id": "r1", "account": ACCOUNT, "rootRunId": "r1", "depth": 0, "kind": "agent",
                    "agentId": "a1", "sessionId": "s1", "origin": "user", "title": "hello",
                    "status": "queued", "attempt": 0, "createdAt": 10, "updatedAt": 10}
    assert runs.get_run(conn, "r1") == info
    assert runs.get_run(conn, "nope") is None
    no_session = runs.create_run(conn, "r2", ACCOUNT, "a1", None, None, 11)
    assert "sessionId" not in no_session and runs.get_run(conn, "r2") == no_session


def test_set_run_status_error_and_attempts(conn):
    runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", "e1", 10)
    running = runs.set_run_status(conn, "r1", "running", 11)
    assert (running["status"], running["attempt"], running["updatedAt"], running["startedAt"]) == \
        ("running", 1, 11, 11)
    error = {"code": "provider-error", "message": "provider timed out"}
    failed = runs.set_run_status(conn, "r1", "failed", 12, error=error)
    assert failed["error"] == error and failed["attempt"] == 1 and failed["finishedAt"] == 12
    assert runs.get_run(conn, "r1") == failed
    with pytest.raises(runs.IllegalTransition):  # a terminal run stays ended
        runs.set_run_status(conn, "r1", "running", 13)
    with pytest.raises(NotFound):
        runs.set_run_status(conn, "nope", "running", 13)


def test_queue_is_fifo_even_within_one_millisecond(conn):
    for i in range(5):
        runs.create_run(conn, f"r{i}", ACCOUNT, "a1", "s1", f"e{i}", 10)  # same ms
    runs.create_run(conn, "r-early", ACCOUNT, "a1", "s2", None, 5)
    runs.set_run_status(conn, "r2", "running", 11)
    queued = runs.queued_runs(conn, 10)
    assert [r["id"] for r in queued] == ["r-early", "r0", "r1", "r3", "r4"]
    assert queued[1]["account"] == ACCOUNT and queued[1]["userEventId"] == "e0"
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
    runs.set_run_status(conn, "r2", "failed", 13, error={"code": "x", "message": "boom"})
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
    runs.set_run_status(conn, "r2", "running", 20)
    runs.set_run_status(conn, "r0", "running", 20)
    runs.set_run_status(conn, "r1", "running", 20)
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
    canceled = runs.cancel_runs(conn, runs.queued_runs_of_session(conn, "s1", 10), 12)
    assert sorted(r["id"] for r in canceled) == ["r1", "r2", "r3"]
    assert all(r["status"] == "canceled" and r["updatedAt"] == 12 and r["finishedAt"] == 12 for r in canceled)
    assert runs.get_run(conn, "r0")["status"] == "running"   # the live run is the runtime's to stop
    assert runs.get_run(conn, "other")["status"] == "queued"


def test_transition_is_pure_and_checks_moves():
    run = {"id": "r", "status": "queued", "attempt": 0, "createdAt": 1, "updatedAt": 5}
    running = runs.transition(run, "running", 3)   # the clock stepped back: updatedAt holds
    assert run["status"] == "queued"                # the input is untouched
    assert running == {**run, "status": "running", "attempt": 1, "startedAt": 3, "updatedAt": 5}
    requeued = runs.transition(running, "queued", 7)
    again = runs.transition(requeued, "running", 8)
    assert again["attempt"] == 2 and again["startedAt"] == 3  # the first start is kept
    done = runs.transition(again, "succeeded", 9, usage={"input": 1, "output": 2, "cacheRead": 0,
                                                         "cacheWrite": 0, "total": 3})
    assert done["finishedAt"] == 9 and done["usage"]["total"] == 3
    for end in ("succeeded", "failed", "canceled"):
        for to in runs.STATUSES:
            with pytest.raises(runs.IllegalTransition):
                runs.transition({**done, "status": end}, to, 10)
    with pytest.raises(runs.IllegalTransition):
        runs.transition(run, "succeeded", 4)   # a queued run never ran


def test_save_run_writes_only_from_the_expected_status(conn):
    queued = runs.create_run(conn, "r1", ACCOUNT, "a1", "s1", None, 10)
    running = runs.transition(queued, "running", 11)
    assert runs.save_run(conn, "queued", running)
    canceled = runs.transition(running, "canceled", 12)
    assert runs.save_run(conn, "running", canceled)
    late = runs.transition(running, "succeeded", 13)   # the turn ends after the cancel
    assert not runs.save_run(conn, "running", late)
    assert runs.get_run(conn, "r1") == canceled


def test_tree_listing_and_descendants(conn):
    root = runs.create_run(conn, "root", ACCOUNT, "a1", "s1", None, 10)
    child = runs.create_run(conn, "c1", ACCOUNT, "a1", "s2", None, 11, parent=root, origin="agent")
    grand = runs.create_run(conn, "g1", ACCOUNT, "a1", None, None, 12, parent=child, origin="agent")
    runs.create_run(conn, "c2", ACCOUNT, "a1", None, None, 13, parent=root, origin="agent")
    assert (child["rootRunId"], child["parentRunId"], child["depth"]) == ("root", "root", 1)
    assert (grand["rootRunId"], grand["depth"]) == ("root", 2)
    tree = runs.runs_of_tree(conn, "root", None, 100)
    assert [r["id"] for r in tree] == ["root", "c1", "g1", "c2"]
    assert [r["id"] for r in runs.descendants(tree, "c1")] == ["g1"]
    assert sorted(r["id"] for r in runs.descendants(tree, "root")) == ["c1", "c2", "g1"]
    assert [r["id"] for r in runs.runs_of_session(conn, "s1", None, 10)] == ["root"]
    assert [r["id"] for r in runs.runs_of_agent(conn, "a1", None, 2)] == ["c2", "g1"]
    assert [r["id"] for r in runs.runs_of_agent(conn, "a1", "queued", 10)] == ["c2", "g1", "c1", "root"]

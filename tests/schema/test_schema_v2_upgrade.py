"""A database written by the schema-2 release (tests/fixtures/v2_release.sqlite, made by
tests/fixtures/make_v2_release.py through that release's server) migrates to the current schema
with every row intact, and the server serves it."""
from __future__ import annotations

import shutil
from pathlib import Path

import apsw

from seed_agents import schema
from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.store import runs as runs_q

from tests.conftest import make_config
from tests.server.runtime.test_runtime_turns import events_count, send
from tests.waiting import until
from tests.wsraw import V2Client, keypair

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v2_release.sqlite"


def snapshot(conn) -> dict:
    q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
    return {
        "agents": q("SELECT id, account_id, definition, state_dir, status, created_at, updated_at FROM agents ORDER BY id"),
        "sessions": q("SELECT id, account_id, agent_id, title, status, last_seq, created_at, updated_at"
                      " FROM sessions ORDER BY id"),
        "events": q("SELECT session_id, seq, id, created_at, body FROM session_events ORDER BY session_id, seq"),
        "runs": q("SELECT rowid, id, account_id, agent_id, session_id, user_event_id, status, attempt, created_at,"
                  " updated_at, error FROM runs ORDER BY rowid"),
        "idempotency": q("SELECT * FROM idempotency ORDER BY account_id, action, client_id"),
        "providers": q("SELECT account_id, name, config, created_at, updated_at FROM model_providers"
                       " ORDER BY account_id, name"),
    }


def test_v2_release_database_migrates_intact(tmp_path):
    path = tmp_path / "agents.sqlite"
    shutil.copy(FIXTURE, path)
    old = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    assert old.execute("PRAGMA user_version").fetchall()[0][0] == 2
    before = snapshot(old)
    old.close()
    assert len(before["agents"]) == 3 and len(before["sessions"]) == 5 and len(before["events"]) == 26
    assert len(before["runs"]) == 13 and len(before["idempotency"]) == 14
    conn = open_database(str(path))
    try:
        assert conn.execute("PRAGMA user_version").fetchall()[0][0] == schema.CURRENT_VERSION
        assert snapshot(conn) == before
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        titles = dict(conn.execute("SELECT id, title FROM sessions").fetchall())
        for run in (runs_q.get_run(conn, r[1]) for r in before["runs"]):
            assert run["rootRunId"] == run["id"] and run["depth"] == 0 and "parentRunId" not in run
            assert (run["kind"], run["origin"]) == ("agent", "user")
            assert run["title"] == (titles[run["sessionId"]] or "")
            assert "startedAt" in run and "finishedAt" in run   # every old run ran and ended
            if run["status"] == "failed":
                assert run["error"]["code"] == "run-failed" and "refused" in run["error"]["message"]
            else:
                assert "error" not in run
        assert {r[0] for r in conn.execute("SELECT title_source FROM sessions")} == {"system"}
    finally:
        conn.close()


async def test_server_serves_a_migrated_v2_database(tmp_path):
    from seed_agents.server.main import start_server

    shutil.copy(FIXTURE, tmp_path / "agents.sqlite")
    running = await start_server(make_config(tmp_path))
    try:
        a = keypair("A")   # the fixture's first account
        c = await V2Client.open(running.url)
        agents = (await c.call(a, {"_": "ListAgents"}))["agents"]
        assert sorted(x["definition"]["name"] for x in agents) == ["Dead", "Echo"]
        listed = await c.call(a, {"_": "ListSessions", "limit": 2})
        assert len(listed["sessions"]) == 2 and set(listed["nextCursor"]) == {"updatedBefore", "idBefore"}
        rest = await c.call(a, {"_": "ListSessions", "cursor": listed["nextCursor"]})
        assert len(rest["sessions"]) == 1 and "nextCursor" not in rest
        titled = next(s for s in listed["sessions"] + rest["sessions"] if s.get("title") == "Titled")
        got = await c.call(a, {"_": "GetSession", "sessionId": titled["id"]})
        assert [e["event"]["content"] for e in got["events"]][:2] == ["hello 0", "echo: hello 0"]
        runs = (await c.call(a, {"_": "ListRuns", "sessionId": titled["id"]}))["runs"]
        assert len(runs) == 3 and all(r["status"] == "succeeded" for r in runs)
        await send(c, a, titled["id"], "after the upgrade")
        got = await until(events_count(c, a, titled["id"], 8), 4, what="8 events")
        assert got["events"][-1]["event"]["content"] == "echo: after the upgrade"
        failed = next(s for s in listed["sessions"] + rest["sessions"] if s.get("title") == "fails")
        assert failed["status"] == "error"
        await c.close()
    finally:
        await running.stop()

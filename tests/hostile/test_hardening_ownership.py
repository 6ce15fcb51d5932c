"""Issue 12, finding 11: "exists, not yours" and "does not exist" look and cost the same.

Ownership is read first, from the primary key and the account_id column alone; only the owner's
request loads the row (and decodes an agent's definition). Shown three ways:
- over a socket, every way to name another account's agent, session or run gets the very 404
  text a missing id gets;
- an agent whose stored definition cannot be decoded: the foreign path still answers 404 (it
  never decodes), while the owner's own read of it fails (so decoding would have shown);
- at the store level, the foreign path runs only primary-key searches of small columns (the
  owner and public_read, then the account's grant in agent_collaborators): never the definition.
"""
from __future__ import annotations

import logging
import uuid

import pytest

from seed_agents.server.handlers.access import agent_for, run_for, session_for
from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.store import agents, runs, sessions

from tests.wsraw import V2Client, keypair, setup_session

A, B = keypair("own-A"), keypair("own-B")


def masked(message: str, ident: str) -> str:
    return message.replace(ident, "<id>")


async def foreign_and_missing(client, kind_actions, ident: str) -> tuple[dict, dict]:
    missing = str(uuid.uuid4())
    foreign = await client.call(B, kind_actions(ident))
    absent = await client.call(B, kind_actions(missing))
    return ({**foreign, "message": masked(foreign["message"], ident)},
            {**absent, "message": masked(absent["message"], missing)})


async def test_foreign_and_missing_get_the_same_404(server):
    owner = await V2Client.open(server.url)
    other = await V2Client.open(server.url)
    try:
        agent_id, session_id = await setup_session(owner, A)
        r = await owner.call(A, {"_": "MessageSession", "sessionId": session_id,
                                 "content": [{"type": "text", "text": "hi"}]})
        run_id = r["runId"]
        probes = [
            (agent_id, lambda i: {"_": "GetAgent", "agentId": i}),
            (agent_id, lambda i: {"_": "CreateSession", "agentId": i}),
            (agent_id, lambda i: {"_": "ListSessions", "agentId": i}),
            (agent_id, lambda i: {"_": "Subscribe", "key": "agents/" + i}),
            (session_id, lambda i: {"_": "GetSession", "sessionId": i}),
            (session_id, lambda i: {"_": "StopSession", "sessionId": i}),
            (session_id, lambda i: {"_": "MessageSession", "sessionId": i,
                                    "content": [{"type": "text", "text": "x"}]}),
            (session_id, lambda i: {"_": "Subscribe", "key": "sessions/" + i}),
            (run_id, lambda i: {"_": "Subscribe", "key": "runs/" + i}),
        ]
        for ident, make in probes:
            foreign, absent = await foreign_and_missing(other, make, ident)
            assert foreign["_"] == "Error" and foreign["status"] == 404, (make(ident), foreign)
            assert foreign == absent, (make(ident), foreign, absent)
    finally:
        await owner.close()
        await other.close()


async def test_foreign_path_never_decodes_the_definition(server, caplog):
    owner = await V2Client.open(server.url)
    other = await V2Client.open(server.url)
    try:
        r = await owner.call(A, {"_": "CreateAgent", "definition": {
            "name": "big", "systemPrompt": "p" * 50_000, "modelProvider": "echo", "model": "m"}})
        agent_id = r["agentId"]
        # Break the stored definition: decoding it now fails, so any path that decodes shows.
        await server.app.db.write(lambda conn: conn.execute(
            "UPDATE agents SET definition = ? WHERE id = ?", (b"\xff", agent_id)))
        for make in (lambda i: {"_": "GetAgent", "agentId": i},
                     lambda i: {"_": "CreateSession", "agentId": i},
                     lambda i: {"_": "Subscribe", "key": "agents/" + i}):
            foreign, absent = await foreign_and_missing(other, make, agent_id)
            assert foreign["status"] == 404 and foreign == absent, (foreign, absent)
        with caplog.at_level(logging.CRITICAL, logger="seed_agents"):
            mine = await owner.call(A, {"_": "GetAgent", "agentId": agent_id})
        assert mine["_"] == "Error" and mine["status"] == 500   # the owner's path does decode
    finally:
        await owner.close()
        await other.close()


@pytest.fixture
def store(tmp_path):
    conn = open_database(str(tmp_path / "db.sqlite"))
    agents.create_agent(conn, "a1", "acct-A", {"name": "n", "systemPrompt": "x" * 100_000}, "/d", 1)
    sessions.create_session(conn, "s1", "acct-A", "a1", "t", 2)
    runs.create_run(conn, "r1", "acct-A", "a1", "s1", "e1", 3)
    yield conn
    conn.close()


# What the access check may read before access is settled: owners and flags by primary key,
# then the caller's grant by primary key. Nothing else (above all no definition).
ACCESS_READS = {
    "agents": "SELECT account_id, public_read, public_chat IS NOT NULL FROM agents WHERE id = ?",
    "sessions": "SELECT account_id, agent_id, visitor_id FROM sessions WHERE id = ?",
    "runs": "SELECT account_id, agent_id, session_id FROM runs WHERE id = ?",
    # (a run of a session: whether that session is a visitor's, public chat)
    "visitor": "SELECT visitor_id FROM sessions WHERE id = ?",
    "grant": ("SELECT role FROM agent_collaborators WHERE agent_id = ? AND account_id = ?"
              " AND status = 'accepted'"),
}


@pytest.mark.parametrize("check, ident, table", [
    (agent_for, "a1", "agents"), (session_for, "s1", "sessions"), (run_for, "r1", "runs")])
def test_foreign_check_reads_only_primary_keys_of_small_columns(store, check, ident, table):
    seen: list[str] = []

    def tracer(cursor, sql, bindings):
        seen.append(sql)
        return True

    store.exec_trace = tracer
    for account, target in (("acct-B", ident), ("acct-B", "missing"), ("acct-A", "missing")):
        seen.clear()
        with pytest.raises(Exception) as e:
            check(store, account, target)
        assert getattr(e.value, "status", None) == 404
        assert seen and seen[0] == ACCESS_READS[table], seen
        assert set(seen) <= set(ACCESS_READS.values()), seen
        if target == "missing":
            assert seen == [ACCESS_READS[table]], seen   # nothing more for a missing id
    seen.clear()
    assert check(store, "acct-A", ident)["id"] == ident   # the owner gets the whole row
    assert len(seen) == 2 and seen[0] == ACCESS_READS[table], seen
    store.exec_trace = None
    for sql in ACCESS_READS.values():
        plan = [d for *_, d in store.execute("EXPLAIN QUERY PLAN " + sql.replace("?", "'x'")).fetchall()]
        assert len(plan) == 1 and plan[0].startswith("SEARCH"), plan
        assert "PRIMARY KEY" in plan[0] or "(id=?)" in plan[0], plan

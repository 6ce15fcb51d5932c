"""Every statement the hot query functions run is an index search: no full scan, no sort.

The statements are captured from the real functions with an exec tracer, so a query edited
later is checked as it is, not as a copy in this file.
"""
from __future__ import annotations

import pytest

from seed_agents.server.database.sqlite.gate import open_database
from seed_agents.server.store import (
    accounts,
    agents,
    collaborators,
    events,
    idempotency,
    owners,
    providers,
    runs,
    secrets_table,
    sessions,
    signatures,
    turns,
)

A = "z6MkAccount"


def exercise(conn) -> None:
    """Call every function on the server's hot paths once, on a small populated database."""
    accounts.add_signer(conn, A, "z6MkSigner", "AGENT", "cid", b"blob", 1)
    accounts.is_signer(conn, A, "z6MkSigner")
    signatures.claim_signature(conn, b"s" * 64, 100, 1)
    signatures.claim_signatures(conn, [(b"t" * 64, 100)], 1)
    signatures.prune_signatures(conn, 50)
    signatures.unexpired_signatures(conn, 50)
    idempotency.idem_get(conn, A, "CreateAgent", "c")
    idempotency.idem_put(conn, A, "CreateAgent", "c", b"f", b"r", 1)
    providers.set_provider(conn, A, "p", {"type": "echo"}, 1)
    providers.get_provider(conn, A, "p")
    providers.list_providers(conn, A)
    secrets_table.set_secret(conn, A, "k", b"sealed", None, 1)
    secrets_table.get_secret_ciphertext(conn, A, "k")
    secrets_table.list_secret_names(conn, A)
    for i in range(3):
        agents.create_agent(conn, f"a{i}", A, {"name": "n"}, "/d", i)
        for j in range(3):
            sessions.create_session(conn, f"s{i}{j}", A, f"a{i}", None, i * 10 + j)
    agents.get_agent(conn, "a0")
    agents.list_agents(conn, A)
    _, cursor = agents.list_agents_page(conn, A, 1, None, 1 << 20)
    agents.list_agents_page(conn, A, 1, cursor, 1 << 20)
    agents.definition_size(conn, "a0")
    providers.count_providers(conn, A)
    agents.set_agent_status(conn, "a0", "running", 5)
    agents.touch_agent(conn, "a0", 6)
    sessions.get_session(conn, "s00")
    _, cursor = sessions.list_sessions(conn, A, None, 2, None)
    sessions.list_sessions(conn, A, None, 2, cursor)
    _, cursor = sessions.list_sessions(conn, A, "a1", 1, None)
    sessions.list_sessions(conn, A, "a1", 1, cursor)
    sessions.create_session(conn, "child", A, "a0", None, 3, parent_session_id="s00")
    sessions.list_sessions(conn, A, None, 2, None, include_children=False)
    _, cursor = sessions.list_sessions(conn, A, None, 1, None, parent_session_id="s00")
    sessions.list_sessions(conn, A, None, 1, {"updatedBefore": 3, "idBefore": "z"}, parent_session_id="s00")
    sessions.sessions_of_agent(conn, "a0", 10)
    sessions.set_session_status(conn, "s00", "streaming", 7)
    for k in range(3):
        events.append_event(conn, "s00", {"type": "message", "role": "user", "content": "x"}, f"e{k}", 8)
    events.events_after(conn, "s00", 1, 10)
    events.event_bodies_after(conn, "s00", 0, 10)
    events.last_seq(conn, "s00")
    runs.create_run(conn, "r1", A, "a0", "s00", "e0", 9)
    runs.create_run(conn, "r2", A, "a0", "s00", "e1", 9)
    runs.get_run(conn, "r1")
    runs.set_run_status(conn, "r1", "running", 10)
    runs.runs_of_tree(conn, "r1", None, 10)
    runs.runs_of_session(conn, "s00", None, 10)
    runs.runs_of_agent(conn, "a0", None, 10)
    runs.queued_runs(conn, 10)
    runs.active_runs_of_session(conn, "s00")
    runs.latest_run_of_session(conn, "s00")
    runs.session_status_from_runs(conn, "s00")
    runs.requeue_interrupted(conn, 11)
    runs.queued_runs_of_session(conn, "s00", 10)
    runs.has_active_run(conn, "s00")
    turns.in_flight(conn, A, 100)   # the account's runs in flight: its rows of account_live_runs
    # Sharing: the access check, grants, invitations, and the listings of shared agents.
    B = "z6MkOther"
    agents.create_agent(conn, "b0", B, {"name": "theirs"}, "/d", 1)
    sessions.create_session(conn, "sb0", B, "b0", None, 2)
    collaborators.invite(conn, "b0", A, "reader", 3)
    collaborators.invite(conn, "a1", B, "writer", 3)
    collaborators.invites_of(conn, B)
    collaborators.accept(conn, "b0", A, 4)
    collaborators.decline(conn, "a1", B)
    collaborators.get(conn, "b0", A)
    collaborators.accepted_role(conn, "b0", A)
    collaborators.collaborators_of(conn, "b0")
    collaborators.members(conn, "b0")
    collaborators.shared_agents(conn, A)
    collaborators.list_shared_agents(conn, A)
    collaborators.set_public_read(conn, "b0", True, 5)
    _, cursor = collaborators.sessions_page(conn, A, ["b0"], 2, None, True)
    collaborators.sessions_page(conn, A, ["b0"], 2, cursor, False)
    owners.agent_access(conn, "b0")
    owners.session_access(conn, "sb0")
    owners.run_access(conn, "r1")
    collaborators.remove(conn, "b0", A)
    runs.cancel_runs(conn, runs.active_runs_of_session(conn, "s00"), 12)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    conn = open_database(str(tmp_path_factory.mktemp("plans") / "db.sqlite"))
    seen: dict[str, object] = {}

    def tracer(cursor, sql, bindings):
        seen.setdefault(sql, bindings)
        return True

    conn.exec_trace = tracer
    exercise(conn)
    conn.exec_trace = None
    out = {}
    for sql, bindings in seen.items():
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, bindings).fetchall()
        out[sql] = [detail for *_, detail in rows]
    conn.close()
    return out


def test_every_hot_statement_was_captured(plans):
    assert len(plans) >= 35


def test_no_full_scan_and_no_sort(plans):
    bad = {sql: plan for sql, plan in plans.items()
           if any(d.startswith("SCAN") or "TEMP B-TREE" in d for d in plan)}
    assert bad == {}


@pytest.mark.parametrize("fragment, index", [
    ("FROM agents WHERE account_id", "agents_by_account"),
    ("FROM sessions WHERE account_id", "sessions_by_account"),
    ("FROM sessions WHERE agent_id", "sessions_by_agent"),
    ("WHERE status = 'queued'", "runs_by_status"),
    ("WHERE session_id = ? AND status IN", "runs_active_by_session"),
    ("FROM runs WHERE session_id = ? ORDER BY", "runs_by_session"),
    ("DELETE FROM accepted_signatures", "accepted_signatures_by_expiry"),
    ("DELETE FROM accepted_signature_sets", "accepted_signature_sets_by_expiry"),
    ("SELECT sigs FROM accepted_signature_sets", "accepted_signature_sets_by_expiry"),
    ("WHERE status IN ('claimed', 'running')", "runs_by_status"),
    ("FROM sessions WHERE parent_session_id", "sessions_by_parent"),
    ("WHERE root_run_id = ?", "runs_by_root"),
    ("FROM runs WHERE agent_id", "runs_by_agent"),
    ("WHERE runs.agent_id = agents.id", "runs_active_by_agent"),   # AgentInfo.busy
    ("FROM agent_collaborators INDEXED BY agent_collaborators_by_account", "agent_collaborators_by_account"),
    ("FROM agent_collaborators c INDEXED BY", "agent_collaborators_by_account"),   # ListAgentInvites
    ("FROM agent_collaborators WHERE agent_id = ? AND account_id = ?", "PRIMARY KEY"),  # the access check
    # The session worker's next run: whether one is parked is its own index, whatever the queue.
    ("FROM runs w WHERE w.session_id = ? AND w.status = 'waiting'", "runs_waiting_by_session"),
    # ... and its oldest queued run (the CAST keeps SQLite 3.54 from re-preparing it per call).
    ("WHERE session_id = CAST(? AS TEXT) AND status IN", "runs_active_by_session"),
])
def test_hot_queries_use_their_index(plans, fragment, index):
    matching = {sql: plan for sql, plan in plans.items() if fragment in sql}
    assert matching, fragment
    for sql, plan in matching.items():
        assert any(index in d for d in plan), (sql, plan)


def test_keyset_page_is_a_range_not_a_filter(plans):
    # A deep page must start at the cursor in the index, not walk the account's rows before it.
    paged = [plan for sql, plan in plans.items() if "FROM sessions WHERE account_id" in sql and "updated_at <=" in sql]
    assert paged and all(any("updated_at<?" in d for d in plan) for plan in paged)

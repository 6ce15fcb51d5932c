"""baseline.sql must build exactly what migrations 1..N build, and the numbering must be sound."""
from __future__ import annotations

import re

import apsw

from seed_agents import schema


def _normalize(sql: str) -> str:
    # ALTER TABLE ADD COLUMN rewrites the stored CREATE text with different spacing and no
    # comments, so compare token streams, not text.
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    sql = sql.replace('"', "")  # a rebuilt table's name is quoted by ALTER TABLE RENAME
    sql = re.sub(r"\s+", " ", sql).strip().lower()
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


def describe(conn: apsw.Connection) -> dict:
    """Everything that defines the schema: objects' SQL, and each table's columns and indexes."""
    out: dict = {"user_version": conn.execute("PRAGMA user_version").fetchall()}
    objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name").fetchall()
    out["objects"] = [(t, n, tn, _normalize(sql) if sql else None) for t, n, tn, sql in objects]
    for (table,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").fetchall():
        out[f"{table}.columns"] = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
        out[f"{table}.fks"] = conn.execute(f"PRAGMA foreign_key_list({table})").fetchall()
        out[f"{table}.list"] = conn.execute(f"PRAGMA table_list({table})").fetchall()
        indexes = conn.execute(f"PRAGMA index_list({table})").fetchall()
        out[f"{table}.indexes"] = sorted(indexes, key=lambda r: r[1])
        for index in indexes:
            out[f"{index[1]}.xinfo"] = conn.execute(f"PRAGMA index_xinfo({index[1]})").fetchall()
    return out


def from_baseline() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(schema.baseline_sql())
    return conn


def from_migrations(upto: int = schema.CURRENT_VERSION) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    for version, sql in schema.migrations():
        if version <= upto:
            conn.execute(sql)
    return conn


def test_migrations_are_numbered_1_to_current():
    assert [v for v, _ in schema.migrations()] == list(range(1, schema.CURRENT_VERSION + 1))
    assert schema.CURRENT_VERSION == 25


def test_baseline_equals_migrations_applied_in_order():
    base, migrated = describe(from_baseline()), describe(from_migrations())
    assert base.keys() == migrated.keys()
    for key in base:
        assert base[key] == migrated[key], key


def test_version_2_adds_real_schema():
    v1, v2 = describe(from_migrations(1)), describe(from_migrations(2))
    assert "accepted_signatures.columns" not in v1 and "accepted_signatures.columns" in v2
    assert "error" not in [c[1] for c in v1["runs.columns"]]
    assert "error" in [c[1] for c in v2["runs.columns"]]


def test_version_3_adds_the_shapes_columns():
    v2, v3 = describe(from_migrations(2)), describe(from_migrations(3))
    columns = lambda d, t: [c[1] for c in d[f"{t}.columns"]]  # noqa: E731
    added = {"agents": ["public_read", "activity_at", "activity_kind", "activity_session_id", "message_at",
                        "message_from"],
             "sessions": ["message_at", "message_from"], "model_providers": ["id"], "secrets": ["id"]}
    for table, names in added.items():
        assert not set(names) & set(columns(v2, table)), table
        assert columns(v3, table)[-len(names):] == names, table
    assert "agent_collaborators.columns" not in v2 and "agent_collaborators.columns" in v3
    assert "runs_active_by_agent.xinfo" in v3 and "runs_active_by_agent.xinfo" not in v2


VERSION_8_TABLES = {"run_event_waits", "run_journal", "tool_documents", "mcp_servers"}


def test_expected_tables_and_strictness():
    conn = from_baseline()
    # Plain tables only: an FTS5 table (`virtual`) and its `shadow` tables are SQLite's own.
    tables = {name: (strict, wr) for _, name, kind, _, wr, strict in conn.execute("PRAGMA table_list")
              if not name.startswith("sqlite_") and kind == "table"}
    assert set(tables) == {"server_config", "accounts", "account_signers", "model_providers", "secrets",
                           "agents", "sessions", "session_events", "runs", "idempotency",
                           "accepted_signatures", "agent_collaborators",
                           "signing_identities",
                           "file_blobs", "file_chunks", "memory_files", "session_attachments", "file_uploads"} | VERSION_8_TABLES | {
        # version 9: triggers
        "agent_triggers", "trigger_firings", "trigger_event_claims", "activity_watermarks",
        "webhook_trigger_credentials",
        # version 11: verifiable history (its session_envelopes became session_events.envelope in 22)
        # version 14: the publication queue
        "hm_publications",
        # version 15: session continuations
        "session_continuations",
        # version 18: agent drafts
        "agent_drafts",
        # version 19: subscription sign-ins in progress
        "provider_logins",
        # version 21: public chat's counters
        "visitor_usage", "visitor_runs",
        # version 23: a write's replay claims, one appended row
        "accepted_signature_sets",
        # version 24: each account's runs in flight, kept by triggers
        "account_live_runs"}
    assert all(strict for strict, _ in tables.values())
    assert tables["session_events"][1] == 1  # WITHOUT ROWID: events are read by (session, seq)


def test_version_4_adds_lineage_and_the_run_tree():
    v2, v3 = describe(from_migrations(3)), describe(from_migrations(4))
    new_session_cols = {c[1] for c in v3["sessions.columns"]} - {c[1] for c in v2["sessions.columns"]}
    assert new_session_cols == {"title_source", "parent_session_id", "run_id", "model_override", "description"}
    new_run_cols = {c[1] for c in v3["runs.columns"]} - {c[1] for c in v2["runs.columns"]}
    assert new_run_cols == {"error_code", "root_run_id", "parent_run_id", "depth", "kind", "origin", "title",
                            "started_at", "finished_at", "usage"}
    assert "runs_active_by_session.xinfo" in v3 and "runs_by_root.xinfo" in v3


def test_version_22_moves_each_envelope_into_its_event_row():
    conn = from_migrations(21)
    conn.execute("INSERT INTO accounts (id, created_at) VALUES ('z6MkA', 1)")
    conn.execute("INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
                 " VALUES ('a1', 'z6MkA', x'a0', '/tmp/a1', 'idle', 1, 1)")
    conn.execute("INSERT INTO sessions (id, account_id, agent_id, status, created_at, updated_at) VALUES ('s1', 'z6MkA', 'a1', 'idle', 1, 1)")
    for seq in (1, 2, 3):
        conn.execute("INSERT INTO session_events (session_id, seq, id, created_at, body, link) VALUES ('s1', ?, ?, 1, x'a0', NULL)",
                     (seq, f"e{seq}"))
    conn.execute("INSERT INTO session_envelopes (session_id, seq, body) VALUES ('s1', 1, x'a101'), ('s1', 3, x'a103')")
    conn.execute(dict(schema.migrations())[22])
    rows = conn.execute("SELECT seq, envelope FROM session_events ORDER BY seq").fetchall()
    assert rows == [(1, b"\xa1\x01"), (2, None), (3, b"\xa1\x03")]
    assert not conn.execute("SELECT name FROM sqlite_schema WHERE name = 'session_envelopes'").fetchall()


def test_version_25_keeps_every_event_row_as_it_was():
    """Packed envelopes need no table change: the version only moves (so an older build is
    refused at start), and envelopes kept whole stay whole."""
    conn = from_migrations(24)
    conn.execute("INSERT INTO accounts (id, created_at) VALUES ('z6MkA', 1)")
    conn.execute("INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
                 " VALUES ('a1', 'z6MkA', x'a0', '/tmp/a1', 'idle', 1, 1)")
    conn.execute("INSERT INTO sessions (id, account_id, agent_id, status, created_at, updated_at) VALUES ('s1', 'z6MkA', 'a1', 'idle', 1, 1)")
    conn.execute("INSERT INTO session_events (session_id, seq, id, created_at, body, link, envelope)"
                 " VALUES ('s1', 1, 'e1', 1, x'a0', NULL, x'a5aa')")
    before = describe(conn)
    conn.execute(dict(schema.migrations())[25])
    assert describe(conn) == before
    assert conn.execute("SELECT envelope FROM session_events").fetchall() == [(b"\xa5\xaa",)]

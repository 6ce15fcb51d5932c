-- Version 7: delegation and tools, as SQLite version 8 (schema/migrations/0008_*.sql says why
-- each column and table exists). A waiting run holds no lease (runs_lease_check): any server
-- may wake it, and the wake is a conditional move out of 'waiting', so it happens once.
ALTER TABLE runs
    ADD COLUMN wait                BYTEA,
    ADD COLUMN wake_at             BIGINT,
    ADD COLUMN parent_tool_call_id TEXT,
    ADD COLUMN input               BYTEA,
    ADD COLUMN output              BYTEA,
    ADD COLUMN budget              BYTEA,
    ADD COLUMN journal_entries     INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN journal_bytes       BIGINT NOT NULL DEFAULT 0;
CREATE INDEX runs_wake ON runs (wake_at) WHERE status = 'waiting' AND wake_at IS NOT NULL;
-- One child per delegate call: a retried turn can never spawn a call's child twice.
CREATE UNIQUE INDEX runs_child_of_call ON runs (parent_run_id, parent_tool_call_id)
    WHERE parent_tool_call_id IS NOT NULL;

CREATE TABLE run_event_waits (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    wait_id    TEXT NOT NULL,
    account_id TEXT NOT NULL,
    match      BYTEA NOT NULL,
    timeout_at BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, wait_id)
);
CREATE INDEX run_event_waits_by_account ON run_event_waits (account_id, created_at);

CREATE TABLE run_journal (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq > 0),
    entry      BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE tool_documents (
    account_id TEXT NOT NULL,
    agent_id   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('builtin', 'lambda', 'mcp')),
    cid        TEXT NOT NULL,
    doc        BYTEA NOT NULL,
    enabled    INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, agent_id, name)
);
CREATE INDEX tool_documents_by_agent ON tool_documents (agent_id, name);

CREATE TABLE mcp_servers (
    id         TEXT NOT NULL PRIMARY KEY,
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    config     BYTEA NOT NULL,
    tools      BYTEA,
    status     BYTEA,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, name)
);

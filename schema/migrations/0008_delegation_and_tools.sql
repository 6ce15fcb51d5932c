-- Version 8: delegation and tools (CONTRACT section 8; the Seed Agents storage design's runs,
-- run_event_waits, run_journal, tool_documents and mcp_servers).
--
-- A parked run ('waiting') says why in `wait` and, when the clock may wake it, when in `wake_at`
-- (a timer, or an event wait's timeout); nothing else wakes it but a child's ending, a signal or a
-- cancel. `input` is what a delegated child was asked (its brief, its output schema), `output` its
-- result. The journal's caps are checked against the two counters, kept in the append's write.
ALTER TABLE runs ADD COLUMN wait BLOB;            -- DAG-CBOR RunWait while status = 'waiting'
ALTER TABLE runs ADD COLUMN wake_at INTEGER;      -- Unix ms: the clock wakes the waiting run then
ALTER TABLE runs ADD COLUMN parent_tool_call_id TEXT;
ALTER TABLE runs ADD COLUMN input BLOB;           -- DAG-CBOR: a child's {brief, output?, title}
ALTER TABLE runs ADD COLUMN output BLOB;          -- DAG-CBOR: what the run returned
ALTER TABLE runs ADD COLUMN budget BLOB;          -- DAG-CBOR: what the tree may still spend
ALTER TABLE runs ADD COLUMN journal_entries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN journal_bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_wake ON runs (wake_at) WHERE status = 'waiting' AND wake_at IS NOT NULL;
-- One child per delegate call: a retried turn can never spawn a call's child twice.
CREATE UNIQUE INDEX runs_child_of_call ON runs (parent_run_id, parent_tool_call_id)
    WHERE parent_tool_call_id IS NOT NULL;

-- One row per open wait of a parked run (what would wake it early); deleted when it is
-- delivered, times out, or its run ends.
CREATE TABLE run_event_waits (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    wait_id    TEXT NOT NULL,
    account_id TEXT NOT NULL,
    match      BLOB NOT NULL, -- DAG-CBOR {signal?}
    timeout_at INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, wait_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX run_event_waits_by_account ON run_event_waits (account_id, created_at);

-- What a run recorded: its calls and results, its waits and their resolutions. seq is dense per
-- run (runs.journal_entries + 1 at the append); at most 5,000 entries or 8 MiB per run.
CREATE TABLE run_journal (
    run_id     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq > 0),
    entry      BLOB NOT NULL, -- DAG-CBOR map {kind, ...}
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- Every tool an agent holds, as a content-addressed document: cid is the CIDv1 (dag-cbor,
-- sha2-256) of exactly `doc`, its canonical DAG-CBOR.
CREATE TABLE tool_documents (
    account_id TEXT NOT NULL,
    agent_id   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('builtin', 'lambda', 'mcp')),
    cid        TEXT NOT NULL,
    doc        BLOB NOT NULL,
    enabled    INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, agent_id, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX tool_documents_by_agent ON tool_documents (agent_id, name);

-- Remote MCP servers an account connected, by name. `tools` is the last successful discovery
-- (kept across a failed refresh); header secrets live in `secrets` and are named in `config`.
CREATE TABLE mcp_servers (
    id         TEXT NOT NULL PRIMARY KEY,
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    config     BLOB NOT NULL, -- DAG-CBOR {url, transport, headers?, secretRefs?}
    tools      BLOB,          -- DAG-CBOR [McpToolInfo]
    status     BLOB,          -- DAG-CBOR {state, error?, checkedAt?}
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (account_id, name)
) STRICT;

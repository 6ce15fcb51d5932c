-- The schema at the current version (4), for creating a fresh database in one step.
-- It must stay equivalent to migrations 0001..N applied in order: tests/test_schema_baseline.py
-- compares the two. When you add a migration, fold its effect in here too.
-- STRICT tables make SQLite refuse a value of the wrong type instead of storing it silently.
CREATE TABLE server_config (
    key   TEXT NOT NULL PRIMARY KEY,
    value ANY
) STRICT, WITHOUT ROWID;

CREATE TABLE accounts (
    id         TEXT NOT NULL PRIMARY KEY,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE account_signers (
    account_id     TEXT NOT NULL REFERENCES accounts (id),
    signer_id      TEXT NOT NULL,
    role           TEXT NOT NULL,
    capability_cid ANY,
    capability     BLOB,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (account_id, signer_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE model_providers (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    config     BLOB NOT NULL, -- DAG-CBOR map
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    id         TEXT, -- UUID v4 (RedactedModelProvider.id); last because version 3 added it
    PRIMARY KEY (account_id, name)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX model_providers_by_id ON model_providers (id);

CREATE TABLE secrets (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    ciphertext BLOB NOT NULL, -- nonce || AES-256-GCM ciphertext || tag, sealed by the server
    metadata   BLOB,          -- DAG-CBOR map, or NULL
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    id         TEXT,          -- UUID v4 (RedactedSecret.id); last because version 3 added it
    PRIMARY KEY (account_id, name)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX secrets_by_id ON secrets (id);

CREATE TABLE agents (
    id         TEXT NOT NULL PRIMARY KEY,
    account_id TEXT NOT NULL,
    definition BLOB NOT NULL, -- DAG-CBOR map
    state_dir  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('idle', 'running', 'stopped', 'error')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    -- Version 3: public read, and the activity rollup (latest transcript activity across the
    -- agent's sessions, written with every appended event; NULL until the first).
    public_read         INTEGER NOT NULL DEFAULT 0 CHECK (public_read IN (0, 1)),
    activity_at         INTEGER,
    activity_kind       TEXT,
    activity_session_id TEXT,
    message_at          INTEGER,
    message_from        TEXT CHECK (message_from IN ('user', 'assistant'))
) STRICT;
CREATE INDEX agents_by_account ON agents (account_id, updated_at DESC, id);

CREATE TABLE sessions (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL REFERENCES agents (id),
    title             TEXT,
    status            TEXT NOT NULL CHECK (status IN ('idle', 'streaming', 'stopped', 'error')),
    last_seq          INTEGER NOT NULL DEFAULT 0, -- the session's seq counter: events take last_seq + 1
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    message_at        INTEGER, -- version 3: the session's latest message (SessionInfo.activity)
    message_from      TEXT CHECK (message_from IN ('user', 'assistant')),
    -- who wrote the title: an automatic title never replaces a 'user' one
    title_source      TEXT NOT NULL DEFAULT 'system' CHECK (title_source IN ('system', 'agent', 'user')),
    parent_session_id TEXT REFERENCES sessions (id),
    run_id            TEXT, -- the run this session is the transcript of
    model_override    BLOB, -- DAG-CBOR {provider, model, reasoningLevel?}
    description       TEXT
) STRICT;
-- Keyset pages run over (updated_at, id) both descending, as the {updatedBefore, idBefore} cursor reads.
CREATE INDEX sessions_by_account ON sessions (account_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_session_id, updated_at DESC, id DESC)
    WHERE parent_session_id IS NOT NULL;

CREATE TABLE session_events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq        INTEGER NOT NULL CHECK (seq > 0),
    id         TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    body       BLOB NOT NULL, -- DAG-CBOR of the whole SessionEvent map, spliced into frames as is
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;

-- Runs form a tree (root_run_id denormalized, so one subscription covers a whole tree).
-- "runs" is quoted as SQLite writes it after the rebuild of migration 0003.
CREATE TABLE "runs" (
    id            TEXT NOT NULL PRIMARY KEY,
    account_id    TEXT NOT NULL,
    agent_id      TEXT NOT NULL REFERENCES agents (id),
    session_id    TEXT REFERENCES sessions (id),
    user_event_id TEXT,
    status        TEXT NOT NULL CHECK (status IN ('queued', 'claimed', 'running', 'waiting',
                                                  'succeeded', 'failed', 'canceled')),
    attempt       INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    error         TEXT, -- the error's message; error_code is its code
    error_code    TEXT,
    root_run_id   TEXT NOT NULL,
    parent_run_id TEXT REFERENCES "runs" (id),
    depth         INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
    kind          TEXT NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent')),
    origin        TEXT NOT NULL DEFAULT 'user' CHECK (origin IN ('user', 'agent', 'system')),
    title         TEXT NOT NULL DEFAULT '',
    started_at    INTEGER,
    finished_at   INTEGER,
    usage         BLOB -- DAG-CBOR {input, output, cacheRead, cacheWrite, total}
) STRICT;
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_session ON runs (session_id, created_at);
-- Live (non-terminal) runs per session: a small index, so "is this session busy?" does not walk
-- a long session's whole run history. Queries repeat this WHERE verbatim.
CREATE INDEX runs_active_by_session ON runs (session_id, created_at)
    WHERE status IN ('queued', 'claimed', 'running', 'waiting');
CREATE INDEX runs_by_root ON runs (root_run_id, created_at);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at);
-- The same per agent: AgentInfo.busy.
CREATE INDEX runs_active_by_agent ON runs (agent_id) WHERE status IN ('queued', 'claimed', 'running', 'waiting');

-- Pending invitations and accepted grants on an agent; its content stays under the owner.
CREATE TABLE agent_collaborators (
    agent_id    TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    account_id  TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('reader', 'writer')),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'accepted')),
    accepted_at INTEGER, -- NULL while pending
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, account_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX agent_collaborators_by_account ON agent_collaborators (account_id, status, updated_at DESC);

CREATE TABLE idempotency (
    account_id  TEXT NOT NULL,
    action      TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    response    BLOB NOT NULL, -- DAG-CBOR of the first response, returned unchanged on a repeat
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, action, client_id)
) STRICT, WITHOUT ROWID;

-- Accepted envelope signatures, so a replay is still refused after a restart.
CREATE TABLE accepted_signatures (
    sig        BLOB NOT NULL PRIMARY KEY,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX accepted_signatures_by_expiry ON accepted_signatures (expires_at);

-- Version 5: signing identities.

-- Version 6: files (memory, attachments, uploads).

-- Version 7: the tool loop.

-- Version 8: delegation and tools.

-- Version 9: triggers.

-- Version 10: hostile clients (capability expiry).
ALTER TABLE account_signers ADD COLUMN expires_at INTEGER;

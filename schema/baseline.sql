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
    link       BLOB, -- CID of the event's block (docs/protocol.md, "Verifiable history"); NULL until backfilled
    -- The signed envelope that caused a user event (its canonical DAG-CBOR, signature included),
    -- kept so an export can prove who asked for it; NULL for every other event (version 22).
    envelope   BLOB,
    PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX session_events_unlinked ON session_events (session_id, seq) WHERE link IS NULL;

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

-- Version 5: signing identities (CONTRACT section 8). An identity is an Ed25519 Seed account key
-- the server holds for one account's agents; its seed is sealed with the secrets key like a
-- secret (nonce || AES-256-GCM ciphertext || tag, the AAD naming the row) and never returned.
-- Agents name identities by `name` in their definition (signingKey, signingKeys).
CREATE TABLE signing_identities (
    account_id  TEXT NOT NULL,    -- the owning account: the only one that may list all, use or delete it
    name        TEXT NOT NULL,    -- hm-account-<first 16 characters of identity_id>
    id          TEXT NOT NULL,    -- UUID v4 (SigningIdentity.id)
    identity_id TEXT NOT NULL,    -- the key's own account id, z6Mk... (SigningIdentity.accountId)
    sealed_seed BLOB NOT NULL,
    label       TEXT,
    icon        TEXT,             -- ipfs://<cid> of the avatar on the published profile
    server_url  TEXT,             -- the HM server the profile went to; NULL: never published
    origin      TEXT NOT NULL CHECK (origin IN ('created', 'imported')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, name)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX signing_identities_by_id ON signing_identities (id);

-- Version 6: files (memory, attachments, uploads). Bytes live here, not on a server's disk:
-- content-addressed blobs (sha256) split into chunks, referenced by memory files and session
-- attachments, counted in `refs` so the last reference's delete frees the blob in its own
-- transaction; a staged upload is a blob without a hash yet (docs/protocol.md, "Files").
CREATE TABLE file_blobs (
    id         INTEGER PRIMARY KEY,
    sha256     BLOB UNIQUE, -- 32 bytes; NULL while an upload is staged
    size       INTEGER NOT NULL,
    refs       INTEGER NOT NULL DEFAULT 0 CHECK (refs >= 0), -- memory files + attachments naming it
    created_at INTEGER NOT NULL
) STRICT;

-- Chunks of a blob in order; `start` is the byte offset of the chunk, so a ranged read reads only
-- the chunks it needs, one at a time.
CREATE TABLE file_chunks (
    blob_id INTEGER NOT NULL REFERENCES file_blobs (id),
    seq     INTEGER NOT NULL,
    start   INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (blob_id, seq)
) STRICT;

-- Agent memory: one row per file; directories are the prefixes of file paths.
CREATE TABLE memory_files (
    id         INTEGER PRIMARY KEY,
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    account_id TEXT NOT NULL, -- the agent's owner: quotas count per account
    path       TEXT NOT NULL,
    blob_id    INTEGER NOT NULL REFERENCES file_blobs (id),
    size       INTEGER NOT NULL,
    is_text    INTEGER NOT NULL, -- 1: clean UTF-8 (indexed for search, read back as text)
    updated_at INTEGER NOT NULL,
    UNIQUE (agent_id, path)
) STRICT;
CREATE INDEX memory_files_by_blob ON memory_files (blob_id);
CREATE INDEX memory_files_by_account ON memory_files (account_id);

-- Full-text search over text memory files (rowid = memory_files.id); PostgreSQL uses tsvector.
CREATE VIRTUAL TABLE memory_search USING fts5 (agent_id UNINDEXED, path, body, tokenize = 'unicode61');

CREATE TABLE session_attachments (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    id         TEXT NOT NULL, -- sha256 hex of the bytes
    account_id TEXT NOT NULL, -- the session's owner
    blob_id    INTEGER NOT NULL REFERENCES file_blobs (id),
    name       TEXT NOT NULL,
    mime_type  TEXT,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX session_attachments_by_blob ON session_attachments (blob_id);
CREATE INDEX session_attachments_by_account ON session_attachments (account_id);

-- Chunked uploads in progress; their bytes are the chunks of `blob_id` (a blob with no hash yet).
CREATE TABLE file_uploads (
    id            TEXT NOT NULL PRIMARY KEY,
    account_id    TEXT NOT NULL, -- who uploads: only this account may append, commit or abort
    owner_account TEXT NOT NULL, -- whose quota it counts against (the agent's owner)
    blob_id       INTEGER NOT NULL REFERENCES file_blobs (id),
    kind          TEXT NOT NULL CHECK (kind IN ('memory', 'session-attachment')),
    agent_id      TEXT NOT NULL,
    session_id    TEXT,
    path          TEXT, -- memory target
    name          TEXT, -- attachment target
    mime_type     TEXT,
    size          INTEGER NOT NULL,
    received      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX file_uploads_by_account ON file_uploads (account_id);
CREATE INDEX file_uploads_by_owner ON file_uploads (owner_account);
CREATE INDEX file_uploads_by_age ON file_uploads (updated_at);
CREATE INDEX file_uploads_by_agent ON file_uploads (agent_id);
CREATE INDEX file_uploads_by_session ON file_uploads (session_id);

-- Version 7: the tool loop.
ALTER TABLE sessions ADD COLUMN plan BLOB; -- DAG-CBOR RunPlan {title?, steps, ownerRunId?, settledAt?}
ALTER TABLE runs ADD COLUMN unmet_obligations BLOB; -- DAG-CBOR [UnmetObligation]

-- Version 8: delegation and tools (schema/migrations/0008_delegation_and_tools.sql says why).
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

-- Version 9: triggers (CONTRACT section 8; seed-agents-storage.txt). A trigger starts agent work
-- on a schedule, a webhook call, Seed activity or the end of a run; each firing has a stable key
-- and the unique (account_id, trigger_id, activity_key) makes a second firing of one key
-- impossible, across restarts and servers.
CREATE TABLE agent_triggers (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL REFERENCES agents (id),
    name              TEXT NOT NULL,
    enabled           INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    source_type       TEXT NOT NULL, -- the source's `type`, so monitors read only their rows
    source_cbor       BLOB NOT NULL, -- DAG-CBOR AgentTriggerSource
    prompt_cbor       BLOB NOT NULL, -- DAG-CBOR: text, or the desktop's block tree
    continuation_cbor BLOB,          -- DAG-CBOR TriggerContinuation; NULL is newThread
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    last_checked_at   INTEGER,
    last_fired_at     INTEGER,
    last_error        TEXT,
    next_due_at       INTEGER, -- schedule: the next slot (ms) to fire; NULL when none is left
    failures          INTEGER NOT NULL DEFAULT 0, -- failed firings in a row (backoff)
    backoff_until     INTEGER, -- firings before this are recorded as skipped
    UNIQUE (agent_id, name)
) STRICT;
CREATE INDEX agent_triggers_by_agent ON agent_triggers (agent_id, created_at);
-- The scheduler's one question: which enabled schedule is due first.
CREATE INDEX agent_triggers_due ON agent_triggers (next_due_at)
    WHERE enabled = 1 AND next_due_at IS NOT NULL;
CREATE INDEX agent_triggers_by_source ON agent_triggers (source_type, account_id) WHERE enabled = 1;

CREATE TABLE trigger_firings (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    trigger_id        TEXT NOT NULL,
    activity_key      TEXT NOT NULL, -- schedule:<triggerId>:<scheduledAt>, webhook:<key>, ...
    status            TEXT NOT NULL CHECK (status IN ('created', 'skipped', 'error')),
    session_id        TEXT,
    run_id            TEXT,
    run_status        TEXT, -- how the run the firing started ended
    scheduled_at      INTEGER,
    summary           TEXT, -- one line on the event (session titles, attribution)
    activity_cbor     BLOB, -- DAG-CBOR: the event the firing answers
    context_cbor      BLOB, -- DAG-CBOR: the trigger's name, prompt and source at admission
    body_digest       BLOB, -- webhook: sha256 of the body, so a reused key with another body is refused
    error             TEXT,
    chain_depth       INTEGER NOT NULL DEFAULT 0, -- run-completed hops behind this firing
    created_at        INTEGER NOT NULL,
    UNIQUE (account_id, trigger_id, activity_key)
) STRICT;
CREATE INDEX trigger_firings_by_trigger ON trigger_firings (trigger_id, created_at);
CREATE INDEX trigger_firings_by_agent ON trigger_firings (agent_id, created_at);
CREATE INDEX trigger_firings_by_run ON trigger_firings (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX trigger_firings_by_session ON trigger_firings (session_id) WHERE session_id IS NOT NULL;

-- Activity admission: an event key claimed once per trigger, before its firing is made.
CREATE TABLE trigger_event_claims (
    account_id   TEXT NOT NULL,
    trigger_id   TEXT NOT NULL,
    activity_key TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (account_id, trigger_id, activity_key)
) STRICT, WITHOUT ROWID;

-- Per account, how far the HM server's activity feed has been read (and, with several servers,
-- which one polls it now: the lease pattern of the run queue).
CREATE TABLE activity_watermarks (
    account_id       TEXT NOT NULL,
    server_url       TEXT NOT NULL,
    cursor_cbor      BLOB NOT NULL, -- DAG-CBOR {seenKeys: [...]}
    last_poll_at     INTEGER,
    last_success_at  INTEGER,
    last_error       TEXT,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    PRIMARY KEY (account_id, server_url)
) STRICT;

-- One row per webhook trigger: the secret hashed (checked on delivery) and sealed (for editors).
CREATE TABLE webhook_trigger_credentials (
    trigger_id        TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    secret_hash       BLOB NOT NULL, -- sha256 of the secret
    secret_ciphertext BLOB NOT NULL, -- sealed with the secrets key, bound to the trigger id
    created_at        INTEGER NOT NULL
) STRICT;

-- Version 10: hostile clients (capability expiry).
ALTER TABLE account_signers ADD COLUMN expires_at INTEGER;

-- Version 12: whether a session has a parked run, one index lookup (created last, as the migration does).
CREATE INDEX runs_waiting_by_session ON runs (session_id) WHERE status = 'waiting';

-- Version 13: plans on runs (schema/migrations/0013_run_plans.sql says why).
ALTER TABLE runs ADD COLUMN plan BLOB;            -- DAG-CBOR RunPlan, the settled copy
ALTER TABLE runs ADD COLUMN step_label TEXT;
ALTER TABLE runs ADD COLUMN plan_step_id TEXT;

-- Version 14: the publication queue (schema/migrations/0014_hm_publications.sql says why).
CREATE TABLE hm_publications (
    id               TEXT NOT NULL PRIMARY KEY,
    account_id       TEXT NOT NULL,
    subject          TEXT NOT NULL,   -- 'identity:<name>' or the document's hm:// address
    seq              INTEGER NOT NULL,
    kind             TEXT NOT NULL,   -- 'blobs' | 'document'
    identity_name    TEXT NOT NULL,   -- the signing identity it publishes as
    agent_id         TEXT,            -- the agent that wrote it (a document), checked again when sent
    what             TEXT NOT NULL,   -- a few words for people: "the new account", "the profile"
    body             BLOB NOT NULL,   -- DAG-CBOR: {blobs: [{cid, data}]} or {markdown, ts}
    server_url       TEXT NOT NULL,
    status           TEXT NOT NULL,   -- 'pending' | 'failed' (refused: kept to be seen, not retried)
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_error       TEXT,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX hm_publications_due ON hm_publications (status, next_attempt_at);
CREATE INDEX hm_publications_subject ON hm_publications (account_id, subject, created_at, seq);

-- Version 15: session continuations (schema/migrations/0015_session_continuations.sql says why).
CREATE TABLE session_continuations (
    successor_session_id   TEXT NOT NULL PRIMARY KEY,
    predecessor_session_id TEXT NOT NULL,
    origin_session_id      TEXT NOT NULL,
    account_id             TEXT NOT NULL,
    tool_call_id           TEXT NOT NULL,
    run_id                 TEXT,
    event_id               TEXT,
    reason                 TEXT,
    manifest               BLOB NOT NULL, -- DAG-CBOR {version, handoff, reason?, sources, loaded, cold}
    created_at             INTEGER NOT NULL,
    UNIQUE (predecessor_session_id, tool_call_id)
) STRICT;
CREATE INDEX session_continuations_by_origin ON session_continuations (origin_session_id);
ALTER TABLE sessions ADD COLUMN continued_from TEXT;
ALTER TABLE sessions ADD COLUMN continued_by TEXT;

-- Version 16: a session's thoroughness (schema/migrations/0016_session_thoroughness.sql says why).
ALTER TABLE sessions ADD COLUMN thoroughness TEXT CHECK (thoroughness IN ('quick', 'normal', 'deep'));

-- Version 17: workflows (schema/migrations/0017_workflows.sql says why).
ALTER TABLE runs ADD COLUMN source_text TEXT;     -- a workflow run's script
ALTER TABLE runs ADD COLUMN continued_from_run_id TEXT;
ALTER TABLE runs ADD COLUMN error_detail BLOB;    -- DAG-CBOR {stack?, tool?, callSeq?}

-- Version 18: agent drafts (schema/migrations/0018_agent_drafts.sql says why).
CREATE TABLE agent_drafts (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    title             TEXT,
    content_format    TEXT NOT NULL,
    content           BLOB NOT NULL,
    metadata          BLOB,
    edit_target       TEXT,
    location_target   TEXT,
    path_name         TEXT,
    visibility        TEXT,
    status            TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    published_at      INTEGER,
    published_id      TEXT,
    published_version TEXT
) STRICT;
CREATE INDEX agent_drafts_agent_updated ON agent_drafts (account_id, agent_id, updated_at);

-- Version 19: pending subscription sign-ins (schema/migrations/0019_provider_logins.sql says why).
CREATE TABLE provider_logins (
    id              TEXT NOT NULL PRIMARY KEY,
    account_id      TEXT NOT NULL,
    provider_type   TEXT NOT NULL,
    verifier        BLOB NOT NULL,
    state           TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    exchange_until  INTEGER,
    exchange_failed INTEGER NOT NULL DEFAULT 0 CHECK (exchange_failed IN (0, 1)),
    secret_name     TEXT,
    error           TEXT,
    expires_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX provider_logins_by_account ON provider_logins (account_id, provider_type);
CREATE INDEX provider_logins_by_expiry ON provider_logins (expires_at);

-- Version 20: combining two triggers (schema/migrations/0020_trigger_merges.sql says why).
ALTER TABLE agent_triggers ADD COLUMN merged_into TEXT;

-- Version 21: public chat (schema/migrations/0021_public_chat.sql says why).
ALTER TABLE agents ADD COLUMN public_chat BLOB;
ALTER TABLE sessions ADD COLUMN visitor_id TEXT;
CREATE INDEX sessions_by_visitor ON sessions (agent_id, visitor_id, updated_at DESC, id DESC)
    WHERE visitor_id IS NOT NULL;
CREATE TABLE visitor_usage (
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    hour_start INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    day_start  INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    PRIMARY KEY (agent_id, account_id)
) STRICT, WITHOUT ROWID;
CREATE TABLE visitor_runs (
    run_id     TEXT NOT NULL PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    reserved   INTEGER NOT NULL,
    day_start  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Version 23: a write's replay claims, one appended row (schema/migrations/0023_signature_sets.sql says why).
CREATE TABLE accepted_signature_sets (
    id         INTEGER PRIMARY KEY,
    expires_at INTEGER NOT NULL, -- the latest expiry among its signatures
    sigs       BLOB NOT NULL     -- 72 bytes a signature: the signature (64), its expiry (8, big-endian ms)
) STRICT;
CREATE INDEX accepted_signature_sets_by_expiry ON accepted_signature_sets (expires_at);

-- Version 24: each account's runs in flight, kept by triggers (schema/migrations/0024_live_runs.sql says why).
CREATE TABLE account_live_runs (
    account_id TEXT NOT NULL,
    slot       INTEGER NOT NULL,
    live       INTEGER NOT NULL, -- the slot's share of the count (the sum is the count)
    PRIMARY KEY (account_id, slot)
) STRICT, WITHOUT ROWID;
-- With triggers on runs, SQLite compiles into every INSERT INTO runs the parent-key side of the
-- runs.parent_run_id foreign key (run only when the statement has left a violation pending), a
-- scan of runs without this index; deleting an agent's runs looks up each one's children the same
-- way. Most runs are roots, so the index holds children only.
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE TRIGGER runs_live_insert AFTER INSERT ON runs
WHEN NEW.status IN ('queued', 'claimed', 'running')
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, 1 FROM agents WHERE id = NEW.agent_id
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;
CREATE TRIGGER runs_live_update AFTER UPDATE OF status, agent_id ON runs
WHEN (OLD.status IN ('queued', 'claimed', 'running')) != (NEW.status IN ('queued', 'claimed', 'running'))
  OR (OLD.agent_id != NEW.agent_id AND OLD.status IN ('queued', 'claimed', 'running'))
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, -1 FROM agents WHERE id = OLD.agent_id AND OLD.status IN ('queued', 'claimed', 'running')
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, 1 FROM agents WHERE id = NEW.agent_id AND NEW.status IN ('queued', 'claimed', 'running')
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;
CREATE TRIGGER runs_live_delete AFTER DELETE ON runs
WHEN OLD.status IN ('queued', 'claimed', 'running')
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, -1 FROM agents WHERE id = OLD.agent_id
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;

-- Version 25: a user event's envelope may be kept packed; no table changes
-- (schema/migrations/0025_packed_envelopes.sql says why).

-- Version 8: triggers (CONTRACT section 8; seed-agents-storage.txt). A trigger starts agent work
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
    source_cbor       BYTEA NOT NULL, -- DAG-CBOR AgentTriggerSource
    prompt_cbor       BYTEA NOT NULL, -- DAG-CBOR: text, or the desktop's block tree
    continuation_cbor BYTEA,          -- DAG-CBOR TriggerContinuation; NULL is newThread
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    last_checked_at   BIGINT,
    last_fired_at     BIGINT,
    last_error        TEXT,
    next_due_at       BIGINT, -- schedule: the next slot (ms) to fire; NULL when none is left
    failures          INTEGER NOT NULL DEFAULT 0, -- failed firings in a row (backoff)
    backoff_until     BIGINT, -- firings before this are recorded as skipped
    UNIQUE (agent_id, name)
);
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
    scheduled_at      BIGINT,
    summary           TEXT, -- one line on the event (session titles, attribution)
    activity_cbor     BYTEA, -- DAG-CBOR: the event the firing answers
    context_cbor      BYTEA, -- DAG-CBOR: the trigger's name, prompt and source at admission
    body_digest       BYTEA, -- webhook: sha256 of the body, so a reused key with another body is refused
    error             TEXT,
    chain_depth       INTEGER NOT NULL DEFAULT 0, -- run-completed hops behind this firing
    created_at        BIGINT NOT NULL,
    UNIQUE (account_id, trigger_id, activity_key)
);
CREATE INDEX trigger_firings_by_trigger ON trigger_firings (trigger_id, created_at);
CREATE INDEX trigger_firings_by_agent ON trigger_firings (agent_id, created_at);
CREATE INDEX trigger_firings_by_run ON trigger_firings (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX trigger_firings_by_session ON trigger_firings (session_id) WHERE session_id IS NOT NULL;

-- Activity admission: an event key claimed once per trigger, before its firing is made.
CREATE TABLE trigger_event_claims (
    account_id   TEXT NOT NULL,
    trigger_id   TEXT NOT NULL,
    activity_key TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (account_id, trigger_id, activity_key)
);

-- Per account, how far the HM server's activity feed has been read (and, with several servers,
-- which one polls it now: the lease pattern of the run queue).
CREATE TABLE activity_watermarks (
    account_id       TEXT NOT NULL,
    server_url       TEXT NOT NULL,
    cursor_cbor      BYTEA NOT NULL, -- DAG-CBOR {seenKeys: [...]}
    last_poll_at     BIGINT,
    last_success_at  BIGINT,
    last_error       TEXT,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    PRIMARY KEY (account_id, server_url)
);

-- One row per webhook trigger: the secret hashed (checked on delivery) and sealed (for editors).
CREATE TABLE webhook_trigger_credentials (
    trigger_id        TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    secret_hash       BYTEA NOT NULL, -- sha256 of the secret
    secret_ciphertext BYTEA NOT NULL, -- sealed with the secrets key, bound to the trigger id
    created_at        BIGINT NOT NULL
);

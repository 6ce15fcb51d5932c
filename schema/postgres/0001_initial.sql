-- PostgreSQL schema, version 1: today's SQLite schema (schema/baseline.sql, SQLite version 2)
-- written for PostgreSQL, plus what several servers on one database need: a lease on runs and a
-- FIFO position for the queue. DDL only: the gate (server.storage.pg_gate) records the version in
-- schema_version, inside the same transaction.
-- Times are milliseconds since the epoch (BIGINT), blobs are BYTEA (DAG-CBOR where noted).

CREATE TABLE server_config (
    key   TEXT NOT NULL PRIMARY KEY,
    value BYTEA
);

CREATE TABLE accounts (
    id         TEXT NOT NULL PRIMARY KEY,
    created_at BIGINT NOT NULL
);

CREATE TABLE account_signers (
    account_id     TEXT NOT NULL REFERENCES accounts (id),
    signer_id      TEXT NOT NULL,
    role           TEXT NOT NULL,
    capability_cid TEXT,  -- the CID's string form (SQLite's ANY column holds the same string)
    capability     BYTEA,
    created_at     BIGINT NOT NULL,
    PRIMARY KEY (account_id, signer_id)
);

CREATE TABLE model_providers (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    config     BYTEA NOT NULL, -- DAG-CBOR map
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

CREATE TABLE secrets (
    account_id TEXT NOT NULL,
    name       TEXT NOT NULL,
    ciphertext BYTEA NOT NULL, -- nonce || AES-256-GCM ciphertext || tag, sealed by the server
    metadata   BYTEA,          -- DAG-CBOR map, or NULL
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);

CREATE TABLE agents (
    id         TEXT NOT NULL PRIMARY KEY,
    account_id TEXT NOT NULL,
    definition BYTEA NOT NULL, -- DAG-CBOR map
    state_dir  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('idle', 'running', 'stopped', 'error')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX agents_by_account ON agents (account_id, updated_at DESC, id);

CREATE TABLE sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    account_id TEXT NOT NULL,
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    title      TEXT,
    status     TEXT NOT NULL CHECK (status IN ('idle', 'streaming', 'stopped', 'error')),
    -- The session's seq counter: an append bumps it with UPDATE ... RETURNING in the event's own
    -- transaction; the row lock orders writers on every server (never MAX(seq)+1).
    last_seq   BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX sessions_by_account ON sessions (account_id, updated_at DESC, id);
CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC, id);

CREATE TABLE session_events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq        BIGINT NOT NULL CHECK (seq > 0),
    id         TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    body       BYTEA NOT NULL, -- DAG-CBOR of the whole SessionEvent map, spliced into frames as is
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE runs (
    id               TEXT NOT NULL PRIMARY KEY,
    -- Queue order: SQLite breaks created_at ties by rowid; this is the same insertion order.
    pos              BIGINT GENERATED ALWAYS AS IDENTITY,
    account_id       TEXT NOT NULL,
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    session_id       TEXT REFERENCES sessions (id),
    user_event_id    TEXT,
    status           TEXT NOT NULL
                     CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    error            TEXT,
    -- The server executing a running run, and until when; it renews the lease while it works.
    -- Another server may take the run back to the queue once the lease has run out.
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    CHECK ((status = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
);
CREATE INDEX runs_by_status ON runs (status, created_at, pos);
CREATE INDEX runs_by_session ON runs (session_id, created_at);
CREATE INDEX runs_active_by_session ON runs (session_id, created_at, pos) WHERE status IN ('queued', 'running');
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE status = 'running';
-- A session's turns run one at a time, whichever server claims them: the database refuses a
-- second running run of one session even if two claimers raced.
CREATE UNIQUE INDEX runs_one_running_per_session ON runs (session_id) WHERE status = 'running';

CREATE TABLE idempotency (
    account_id  TEXT NOT NULL,
    action      TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    fingerprint BYTEA NOT NULL,
    response    BYTEA NOT NULL, -- DAG-CBOR of the first response, returned unchanged on a repeat
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (account_id, action, client_id)
);

-- Accepted envelope signatures, so a replay is refused on every server and after a restart.
CREATE TABLE accepted_signatures (
    sig        BYTEA NOT NULL PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX accepted_signatures_by_expiry ON accepted_signatures (expires_at);

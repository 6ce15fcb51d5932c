-- PostgreSQL schema, version 2: mirrors SQLite versions 3 and 4 (schema/migrations/0003_shapes.sql,
-- 0004_lifecycle.sql): the activity rollup, public read, collaborators, ids on providers and
-- secrets; the life of sessions (title source, lineage, model override, description); runs as a
-- tree with the seven statuses of the Seed protocol, a coded error, timing and usage.
-- PostgreSQL changes a CHECK constraint in place, so runs is altered, not rebuilt.

-- AgentInfo.publicRead and the agent's activity rollup (NULL until the first event).
ALTER TABLE agents
    ADD COLUMN public_read         BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN activity_at         BIGINT,
    ADD COLUMN activity_kind       TEXT,
    ADD COLUMN activity_session_id TEXT,
    ADD COLUMN message_at          BIGINT,
    ADD COLUMN message_from        TEXT CHECK (message_from IN ('user', 'assistant'));

ALTER TABLE sessions
    ADD COLUMN message_at        BIGINT, -- the session's latest message (SessionInfo.activity)
    ADD COLUMN message_from      TEXT CHECK (message_from IN ('user', 'assistant')),
    -- who wrote the title: an automatic title never replaces a 'user' one
    ADD COLUMN title_source      TEXT NOT NULL DEFAULT 'system'
                                 CHECK (title_source IN ('system', 'agent', 'user')),
    ADD COLUMN parent_session_id TEXT REFERENCES sessions (id),
    ADD COLUMN run_id            TEXT,  -- the run this session is the transcript of
    ADD COLUMN model_override    BYTEA, -- DAG-CBOR {provider, model, reasoningLevel?}
    ADD COLUMN description       TEXT;

-- Keyset pages over (updated_at, id) both descending, as the {updatedBefore, idBefore} cursor reads.
DROP INDEX sessions_by_account;
DROP INDEX sessions_by_agent;
CREATE INDEX sessions_by_account ON sessions (account_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_session_id, updated_at DESC, id DESC)
    WHERE parent_session_id IS NOT NULL;

CREATE TABLE agent_collaborators (
    agent_id    TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    account_id  TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('reader', 'writer')),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'accepted')),
    accepted_at BIGINT, -- NULL while pending
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, account_id)
);
CREATE INDEX agent_collaborators_by_account ON agent_collaborators (account_id, status, updated_at DESC);

-- RedactedModelProvider.id and RedactedSecret.id: a UUID v4 made when the row is created and kept
-- by every later upsert; existing rows get one here (gen_random_uuid is core since PostgreSQL 13).
ALTER TABLE model_providers ADD COLUMN id TEXT;
UPDATE model_providers SET id = gen_random_uuid()::text;
CREATE UNIQUE INDEX model_providers_by_id ON model_providers (id);

ALTER TABLE secrets ADD COLUMN id TEXT;
UPDATE secrets SET id = gen_random_uuid()::text;
CREATE UNIQUE INDEX secrets_by_id ON secrets (id);

-- Runs as a tree, with origin, title, timing, usage and a coded error.
ALTER TABLE runs
    ADD COLUMN error_code    TEXT, -- error holds the message
    ADD COLUMN root_run_id   TEXT,
    ADD COLUMN parent_run_id TEXT REFERENCES runs (id),
    ADD COLUMN depth         INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
    ADD COLUMN kind          TEXT NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent')),
    ADD COLUMN origin        TEXT NOT NULL DEFAULT 'user' CHECK (origin IN ('user', 'agent', 'system')),
    ADD COLUMN title         TEXT NOT NULL DEFAULT '',
    ADD COLUMN started_at    BIGINT,
    ADD COLUMN finished_at   BIGINT,
    ADD COLUMN usage         BYTEA; -- DAG-CBOR {input, output, cacheRead, cacheWrite, total}

-- The same backfill as SQLite's rebuild: every old run is a root, titled after its session.
UPDATE runs r SET
    root_run_id = r.id,
    error_code  = CASE WHEN r.error IS NULL THEN NULL ELSE 'run-failed' END,
    title       = coalesce((SELECT s.title FROM sessions s WHERE s.id = r.session_id), ''),
    started_at  = CASE WHEN r.attempt > 0 THEN r.created_at END,
    finished_at = CASE WHEN r.status IN ('succeeded', 'failed', 'canceled') THEN r.updated_at END;
ALTER TABLE runs ALTER COLUMN root_run_id SET NOT NULL;

ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'claimed', 'running', 'waiting', 'succeeded', 'failed', 'canceled'));
-- The lease: a claimed or running run is held by one server until lease_expires_at (it renews it
-- while it works); no other status holds one. A waiting run is parked, executing nowhere: it is
-- woken through the queue and claimed again (docs/storage.md).
ALTER TABLE runs DROP CONSTRAINT runs_check;
ALTER TABLE runs ADD CONSTRAINT runs_lease_check
    CHECK ((status IN ('claimed', 'running')) = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL));

-- Live (non-terminal) runs per session and per agent (AgentInfo.busy), with SQLite's live set.
DROP INDEX runs_active_by_session;
CREATE INDEX runs_active_by_session ON runs (session_id, created_at, pos)
    WHERE status IN ('queued', 'claimed', 'running', 'waiting');
CREATE INDEX runs_active_by_agent ON runs (agent_id) WHERE status IN ('queued', 'claimed', 'running', 'waiting');
CREATE INDEX runs_by_root ON runs (root_run_id, created_at, pos);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at, pos);
DROP INDEX runs_leases;
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE status IN ('claimed', 'running');
-- A session's runs pass the queue one at a time, whichever server claims them: the database
-- refuses a second claimed, running or waiting run of one session even if two claimers raced.
DROP INDEX runs_one_running_per_session;
CREATE UNIQUE INDEX runs_one_live_per_session ON runs (session_id)
    WHERE status IN ('claimed', 'running', 'waiting');

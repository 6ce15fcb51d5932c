-- Version 4: the life of sessions and runs (CONTRACT section 4; seed-agents-storage.txt).
-- Sessions keep who titled them, their lineage, a model override and a live description; runs
-- become a tree (root, parent, depth) with origin, title, timing, usage and a coded error, and
-- their status set grows to the seven of the Seed protocol. SQLite cannot change a CHECK
-- constraint in place, so runs is rebuilt (the gate runs migrations with foreign keys off).

ALTER TABLE sessions ADD COLUMN title_source TEXT NOT NULL DEFAULT 'system'
    CHECK (title_source IN ('system', 'agent', 'user'));
ALTER TABLE sessions ADD COLUMN parent_session_id TEXT REFERENCES sessions (id);
ALTER TABLE sessions ADD COLUMN run_id TEXT; -- the run this session is the transcript of
ALTER TABLE sessions ADD COLUMN model_override BLOB; -- DAG-CBOR {provider, model, reasoningLevel?}
ALTER TABLE sessions ADD COLUMN description TEXT;

-- Keyset pages run over (updated_at, id) both descending, as the {updatedBefore, idBefore}
-- cursor reads.
DROP INDEX sessions_by_account;
DROP INDEX sessions_by_agent;
CREATE INDEX sessions_by_account ON sessions (account_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC, id DESC);
CREATE INDEX sessions_by_parent ON sessions (parent_session_id, updated_at DESC, id DESC)
    WHERE parent_session_id IS NOT NULL;

CREATE TABLE runs_v4 (
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
    parent_run_id TEXT REFERENCES runs_v4 (id),
    depth         INTEGER NOT NULL DEFAULT 0 CHECK (depth >= 0),
    kind          TEXT NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent')),
    origin        TEXT NOT NULL DEFAULT 'user' CHECK (origin IN ('user', 'agent', 'system')),
    title         TEXT NOT NULL DEFAULT '',
    started_at    INTEGER,
    finished_at   INTEGER,
    usage         BLOB -- DAG-CBOR {input, output, cacheRead, cacheWrite, total}
) STRICT;

-- rowid order is kept: it breaks ties among runs created in one millisecond (the queue is FIFO).
INSERT INTO runs_v4 (rowid, id, account_id, agent_id, session_id, user_event_id, status, attempt,
                     created_at, updated_at, error, error_code, root_run_id, parent_run_id, depth,
                     kind, origin, title, started_at, finished_at)
SELECT r.rowid, r.id, r.account_id, r.agent_id, r.session_id, r.user_event_id, r.status, r.attempt,
       r.created_at, r.updated_at, r.error,
       CASE WHEN r.error IS NULL THEN NULL ELSE 'run-failed' END,
       r.id, NULL, 0, 'agent', 'user',
       coalesce((SELECT s.title FROM sessions s WHERE s.id = r.session_id), ''),
       CASE WHEN r.attempt > 0 THEN r.created_at END,
       CASE WHEN r.status IN ('succeeded', 'failed', 'canceled') THEN r.updated_at END
FROM runs r;

DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;

CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_session ON runs (session_id, created_at);
-- Live (non-terminal) runs per session: a small index, so "is this session busy?" does not walk
-- a long session's whole run history. Queries repeat this WHERE verbatim.
CREATE INDEX runs_active_by_session ON runs (session_id, created_at)
    WHERE status IN ('queued', 'claimed', 'running', 'waiting');
CREATE INDEX runs_by_root ON runs (root_run_id, created_at);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at);
-- AgentInfo.busy (version 3's index, dropped with the old table): live runs per agent, with the
-- same live statuses as runs_active_by_session.
CREATE INDEX runs_active_by_agent ON runs (agent_id) WHERE status IN ('queued', 'claimed', 'running', 'waiting');

-- Version 14 (SQLite's version 15): session continuations
-- (schema/migrations/0015_session_continuations.sql says why).
CREATE TABLE session_continuations (
    successor_session_id   TEXT NOT NULL PRIMARY KEY,
    predecessor_session_id TEXT NOT NULL,
    origin_session_id      TEXT NOT NULL,
    account_id             TEXT NOT NULL,
    tool_call_id           TEXT NOT NULL,
    run_id                 TEXT,
    event_id               TEXT,
    reason                 TEXT,
    manifest               BYTEA NOT NULL,
    created_at             BIGINT NOT NULL,
    UNIQUE (predecessor_session_id, tool_call_id)
);
CREATE INDEX session_continuations_by_origin ON session_continuations (origin_session_id);
ALTER TABLE sessions ADD COLUMN continued_from TEXT;
ALTER TABLE sessions ADD COLUMN continued_by TEXT;

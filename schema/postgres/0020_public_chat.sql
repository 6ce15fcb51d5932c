-- Version 20 (SQLite's version 21): public chat (schema/migrations/0021_public_chat.sql says why).
ALTER TABLE agents ADD COLUMN public_chat BYTEA;
ALTER TABLE sessions ADD COLUMN visitor_id TEXT;
CREATE INDEX sessions_by_visitor ON sessions (agent_id, visitor_id, updated_at DESC, id DESC)
    WHERE visitor_id IS NOT NULL;
CREATE TABLE visitor_usage (
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    hour_start BIGINT NOT NULL,
    messages   BIGINT NOT NULL,
    day_start  BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    PRIMARY KEY (agent_id, account_id)
);
CREATE TABLE visitor_runs (
    run_id     TEXT NOT NULL PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    reserved   BIGINT NOT NULL,
    day_start  BIGINT NOT NULL
);

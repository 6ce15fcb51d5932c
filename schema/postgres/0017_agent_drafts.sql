-- Version 17 (SQLite's version 18): agent drafts (schema/migrations/0018_agent_drafts.sql says why).
CREATE TABLE agent_drafts (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    title             TEXT,
    content_format    TEXT NOT NULL,
    content           BYTEA NOT NULL,
    metadata          BYTEA,
    edit_target       TEXT,
    location_target   TEXT,
    path_name         TEXT,
    visibility        TEXT,
    status            TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    published_at      BIGINT,
    published_id      TEXT,
    published_version TEXT
);
CREATE INDEX agent_drafts_agent_updated ON agent_drafts (account_id, agent_id, updated_at);

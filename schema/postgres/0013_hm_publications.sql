-- Version 13 (SQLite's version 14): the publication queue (schema/migrations/0014_hm_publications.sql says why).
CREATE TABLE hm_publications (
    id               TEXT NOT NULL PRIMARY KEY,
    account_id       TEXT NOT NULL,
    subject          TEXT NOT NULL,
    seq              BIGINT NOT NULL,
    kind             TEXT NOT NULL,
    identity_name    TEXT NOT NULL,
    agent_id         TEXT,
    what             TEXT NOT NULL,
    body             BYTEA NOT NULL,
    server_url       TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    last_error       TEXT,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX hm_publications_due ON hm_publications (status, next_attempt_at);
CREATE INDEX hm_publications_subject ON hm_publications (account_id, subject, created_at, seq);

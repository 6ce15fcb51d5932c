-- Version 18 (SQLite's version 19): pending subscription sign-ins in the database
-- (schema/migrations/0019_provider_logins.sql says why).
CREATE TABLE provider_logins (
    id              TEXT NOT NULL PRIMARY KEY,
    account_id      TEXT NOT NULL,
    provider_type   TEXT NOT NULL,
    verifier        BYTEA NOT NULL,
    state           TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    exchange_until  BIGINT,
    exchange_failed INTEGER NOT NULL DEFAULT 0 CHECK (exchange_failed IN (0, 1)),
    secret_name     TEXT,
    error           TEXT,
    expires_at      BIGINT NOT NULL,
    finished_at     BIGINT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX provider_logins_by_account ON provider_logins (account_id, provider_type);
CREATE INDEX provider_logins_by_expiry ON provider_logins (expires_at);

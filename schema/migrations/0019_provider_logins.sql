-- Version 19: pending subscription sign-ins ("Sign in with ChatGPT") kept in the database instead
-- of one server's memory, so a login started on one server of a cluster can be finished, read or
-- canceled on any other (no sticky sessions). The PKCE verifier is sealed with the secrets key,
-- bound to its row; the state is the one the authorization URL carries. `exchange_until`: a
-- server is trading the code until then (a second code waits for no one; a server that died
-- mid-exchange holds the login no longer than that). A finished login is kept for as long as a
-- pending one lives, so a polling client reads how it ended, then swept.
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

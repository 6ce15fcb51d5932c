-- Version 2: runs keep the reason they failed, busy sessions are found through a partial index,
-- and accepted envelope signatures are stored so a replay is still refused after a restart
-- (CONTRACT section 2, step 6).

ALTER TABLE runs ADD COLUMN error TEXT;

-- Queued and running runs per session: a small index, so "is this session busy?" does not walk
-- a long session's whole run history.
CREATE INDEX runs_active_by_session ON runs (session_id, created_at) WHERE status IN ('queued', 'running');

CREATE TABLE accepted_signatures (
    sig        BLOB NOT NULL PRIMARY KEY,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX accepted_signatures_by_expiry ON accepted_signatures (expires_at);

-- Version 2: runs keep the reason they failed, and accepted envelope signatures are stored so a
-- replay is still refused after a restart (CONTRACT section 2, step 6).

ALTER TABLE runs ADD COLUMN error TEXT;

CREATE TABLE accepted_signatures (
    sig        BLOB NOT NULL PRIMARY KEY,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX accepted_signatures_by_expiry ON accepted_signatures (expires_at);

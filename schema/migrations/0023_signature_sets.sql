-- Version 23: the replay guard's claims of one write are one row appended to
-- accepted_signature_sets (its rowid grows), where each signature was a row of
-- accepted_signatures keyed by the signature itself: a random key, so every claim dirtied a leaf
-- of its own and each commit wrote a page per claim (docs/performance.md, "The HTTP write path").
-- accepted_signatures stays: the per-signature claim several servers race on (PostgreSQL), and
-- the rows written before this version, read and pruned with the sets until they expire.
CREATE TABLE accepted_signature_sets (
    id         INTEGER PRIMARY KEY,
    expires_at INTEGER NOT NULL, -- the latest expiry among its signatures
    sigs       BLOB NOT NULL     -- 72 bytes a signature: the signature (64), its expiry (8, big-endian ms)
) STRICT;
CREATE INDEX accepted_signature_sets_by_expiry ON accepted_signature_sets (expires_at);

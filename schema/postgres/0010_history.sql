-- Version 10: verifiable history (SQLite's version 11). Each event's link is the CID of its
-- block {sessionId, seq, prev, event, createdAt}, written in the append's own transaction; NULL
-- only for events stored before this version, until the start-up backfill reaches them.
ALTER TABLE session_events ADD COLUMN link BYTEA;
CREATE INDEX session_events_unlinked ON session_events (session_id, seq) WHERE link IS NULL;

-- The signed envelope that caused a user event, kept so an export can prove who asked for it.
CREATE TABLE session_envelopes (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    body       BYTEA NOT NULL,
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, seq) REFERENCES session_events (session_id, seq)
);

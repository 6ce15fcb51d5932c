-- Version 11: verifiable history (docs/protocol.md, "Verifiable history"). Each event's link is
-- the CID of its block {sessionId, seq, prev, event, createdAt}, written in the append's own
-- transaction; NULL only for events stored before this version, until the start-up backfill
-- (server/store/history.py) reaches them. The partial index finds those, and stays empty after.
ALTER TABLE session_events ADD COLUMN link BLOB;
CREATE INDEX session_events_unlinked ON session_events (session_id, seq) WHERE link IS NULL;

-- The signed envelope that caused a user event, kept so an export can prove who asked for it.
CREATE TABLE session_envelopes (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    body       BLOB NOT NULL, -- the envelope's canonical DAG-CBOR (signature included)
    PRIMARY KEY (session_id, seq),
    FOREIGN KEY (session_id, seq) REFERENCES session_events (session_id, seq)
) STRICT, WITHOUT ROWID;

-- Version 22: a user event's signed envelope is kept in its event's row (session_events.envelope)
-- instead of a table of its own: the append writes one row, not two, and a commit dirties one
-- B-tree fewer (docs/performance.md, "Verifiable history"). The envelopes stored so far move over
-- in this migration's transaction (one per user message since version 11), then their table goes.
ALTER TABLE session_events ADD COLUMN envelope BLOB; -- the envelope's canonical DAG-CBOR (signature included); NULL but for a user message
UPDATE session_events SET envelope = (SELECT v.body FROM session_envelopes v
                                      WHERE v.session_id = session_events.session_id AND v.seq = session_events.seq)
    WHERE (session_id, seq) IN (SELECT session_id, seq FROM session_envelopes);
DROP TABLE session_envelopes;

-- Version 22 (SQLite's version 22): a user event's signed envelope is kept in its event's row
-- (session_events.envelope) instead of a table of its own, so the append writes one row, not two.
-- The envelopes stored so far move over in this migration's transaction, then their table goes.
ALTER TABLE session_events ADD COLUMN envelope BYTEA;
UPDATE session_events e SET envelope = v.body FROM session_envelopes v
    WHERE v.session_id = e.session_id AND v.seq = e.seq;
DROP TABLE session_envelopes;

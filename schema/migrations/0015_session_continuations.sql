-- Version 15: session continuations (continue_session). One row per edge: the successor (one row
-- each), its predecessor, the chain's first session, the call and the message of the turn that
-- made it, the reason, and the manifest: the successor's exact starting point (its handoff, the
-- sources cited, what was loaded and what was left cold). (predecessor, tool call) is unique, so a
-- retried call finds its successor instead of making a second. No foreign keys: a deleted
-- predecessor leaves its successor's row as history (server/store/sessions.delete_session).
-- The sessions carry the links both ways for SessionInfo, written in the same transaction.
CREATE TABLE session_continuations (
    successor_session_id   TEXT NOT NULL PRIMARY KEY,
    predecessor_session_id TEXT NOT NULL,
    origin_session_id      TEXT NOT NULL,
    account_id             TEXT NOT NULL,
    tool_call_id           TEXT NOT NULL,
    run_id                 TEXT,
    event_id               TEXT,
    reason                 TEXT,
    manifest               BLOB NOT NULL, -- DAG-CBOR {version, handoff, reason?, sources, loaded, cold}
    created_at             INTEGER NOT NULL,
    UNIQUE (predecessor_session_id, tool_call_id)
) STRICT;
CREATE INDEX session_continuations_by_origin ON session_continuations (origin_session_id);
ALTER TABLE sessions ADD COLUMN continued_from TEXT; -- the predecessor (SessionInfo.continuedFromSessionId)
ALTER TABLE sessions ADD COLUMN continued_by TEXT;   -- the successor (SessionInfo.continuedBySessionId)

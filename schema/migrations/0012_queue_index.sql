-- Version 12: whether a session has a parked run is one index lookup. The session worker asks it
-- each time it takes the next queued run; scanning the session's active runs for it made a turn
-- cost grow with the queue behind it (docs/performance.md, "A deep queue").
CREATE INDEX runs_waiting_by_session ON runs (session_id) WHERE status = 'waiting';

-- Version 21: a claim finds each session's oldest queued run without walking the session's
-- queue (server/store/leases.py _CLAIM): the sessions with queued runs, one descent each, and
-- the head of each, from this index of queued runs alone.
CREATE INDEX runs_queued_by_session ON runs (session_id, created_at, pos) WHERE status = 'queued';

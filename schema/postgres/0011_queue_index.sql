-- Version 11 (SQLite's version 12): whether a session has a parked run is one index lookup.
CREATE INDEX runs_waiting_by_session ON runs (session_id) WHERE status = 'waiting';

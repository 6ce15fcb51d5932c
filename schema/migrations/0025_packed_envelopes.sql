-- Version 25: a user event's signed envelope (session_events.envelope) may be kept packed,
-- without what its stored event holds, and is rebuilt byte for byte when answered
-- (protocol/api/stored_envelope.py). No table changes and rows kept whole stay as they are; the
-- version moves so that a build which cannot unpack a row is refused at start on a store that
-- may hold packed ones (docs/operations.md, "Several servers": builds of one schema version
-- may be mixed).
SELECT 1;

-- Version 25 (SQLite's version 25): a user event's signed envelope may be kept packed, without
-- what its stored event holds (protocol/api/stored_envelope.py). No table changes; the version
-- moves so that a build which cannot unpack a row is refused at start.
COMMENT ON COLUMN session_events.envelope IS
    'the signed envelope of a user event: packed, 0x01 (cut) or 0x02 (shaped) first (protocol/api/stored_envelope.py), or whole';

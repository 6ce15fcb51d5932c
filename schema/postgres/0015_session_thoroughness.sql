-- Version 15 (SQLite's version 16): a session's thoroughness
-- (schema/migrations/0016_session_thoroughness.sql says why).
ALTER TABLE sessions ADD COLUMN thoroughness TEXT CHECK (thoroughness IN ('quick', 'normal', 'deep'));

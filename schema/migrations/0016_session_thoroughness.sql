-- Version 16: a session's thoroughness, the delegation preset its turns run under (quick, normal or
-- deep; protocol/thoroughness.py). NULL: the default (normal).
ALTER TABLE sessions ADD COLUMN thoroughness TEXT CHECK (thoroughness IN ('quick', 'normal', 'deep'));

-- Version 16 (SQLite's version 17): workflows (schema/migrations/0017_workflows.sql says why).
ALTER TABLE runs ADD COLUMN source_text TEXT;
ALTER TABLE runs ADD COLUMN continued_from_run_id TEXT;
ALTER TABLE runs ADD COLUMN error_detail BYTEA;

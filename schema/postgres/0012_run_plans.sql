-- Version 12 (SQLite's version 13): plans on runs (schema/migrations/0013_run_plans.sql says why).
ALTER TABLE runs ADD COLUMN plan BYTEA;
ALTER TABLE runs ADD COLUMN step_label TEXT;
ALTER TABLE runs ADD COLUMN plan_step_id TEXT;

-- Version 19 (SQLite's version 20): combining two triggers (schema/migrations/0020_trigger_merges.sql says why).
ALTER TABLE agent_triggers ADD COLUMN merged_into TEXT;

-- Version 20: combining two triggers (the storage design's `merged_into`): the retired one names
-- the survivor that took its conditions; it is disabled and immutable, and keeps its firings.
ALTER TABLE agent_triggers ADD COLUMN merged_into TEXT;

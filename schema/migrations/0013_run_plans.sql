-- Version 13: plans on runs. A session's checklist is live state that the next turn replaces; once
-- it settles, its copy is frozen on the run that made it (`plan`), so the finished checklist stays
-- in the run tree. A child spawned while exactly one step of its parent's plan was running is
-- stamped with that step (`plan_step_id`, the durable join, and `step_label`, for display).
ALTER TABLE runs ADD COLUMN plan BLOB;            -- DAG-CBOR RunPlan, the settled copy
ALTER TABLE runs ADD COLUMN step_label TEXT;
ALTER TABLE runs ADD COLUMN plan_step_id TEXT;

-- Version 7: the tool loop. A session keeps the checklist its agent maintains with the plan verb
-- (SessionInfo.plan), and a run what it ended owing (RunInfo.unmetObligations).
ALTER TABLE sessions ADD COLUMN plan BLOB; -- DAG-CBOR RunPlan {title?, steps, ownerRunId?, settledAt?}
ALTER TABLE runs ADD COLUMN unmet_obligations BLOB; -- DAG-CBOR [UnmetObligation]

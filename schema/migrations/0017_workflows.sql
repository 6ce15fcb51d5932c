-- Version 17: workflows (script children). A workflow run keeps the script it runs
-- (`source_text`: replay re-runs exactly this code, and the desktop's run card shows it), the run
-- it continues (`continued_from_run_id`, set by ctx.continueAsNew), and what its failure knew
-- besides code and message (`error_detail`: DAG-CBOR {stack?, tool?, callSeq?}). A run with a
-- source is a workflow: RunInfo.kind says `workflow` (the `kind` column's CHECK could only be
-- widened by rebuilding the table in SQLite, so the column keeps `agent` on both backends).
ALTER TABLE runs ADD COLUMN source_text TEXT;
ALTER TABLE runs ADD COLUMN continued_from_run_id TEXT;
ALTER TABLE runs ADD COLUMN error_detail BLOB;

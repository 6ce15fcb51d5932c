-- PostgreSQL schema, version 6: mirrors SQLite version 7 (schema/migrations/0007_tool_loop.sql):
-- the session's plan and what a run ended owing.
ALTER TABLE sessions ADD COLUMN plan BYTEA; -- DAG-CBOR RunPlan {title?, steps, ownerRunId?, settledAt?}
ALTER TABLE runs ADD COLUMN unmet_obligations BYTEA; -- DAG-CBOR [UnmetObligation]

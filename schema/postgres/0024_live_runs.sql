-- Version 24 (SQLite's version 24): each account's runs in flight kept as a count, moved by
-- triggers in the statement that moves a run's status (schema/migrations/0024_live_runs.sql says
-- why). Several servers end runs of one account at once, and a single row per account would be
-- one more row that every run end (and park, and wake) of the account locks until its commit.
-- So the count is spread over 16 slots, summed on read (an index range of at most 16 rows):
-- a transaction moves the slot its transaction id picks, so two servers' batches meet on one
-- row one time in 16, and all of one batch's moves for an account take one row lock. A slot's
-- share may go below zero (a run counted in one slot ends in another); the sum is the count.
CREATE TABLE account_live_runs (
    account_id TEXT NOT NULL,
    slot       INTEGER NOT NULL,
    live       BIGINT NOT NULL,
    PRIMARY KEY (account_id, slot)
);
INSERT INTO account_live_runs (account_id, slot, live)
SELECT a.account_id, 0, count(*) FROM runs r JOIN agents a ON a.id = r.agent_id
WHERE r.status IN ('queued', 'claimed', 'running') GROUP BY a.account_id;
CREATE FUNCTION runs_live_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slot_ INTEGER := (pg_current_xact_id()::text::bigint % 16)::integer;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status IN ('queued', 'claimed', 'running') THEN
        INSERT INTO account_live_runs AS c (account_id, slot, live)
        SELECT account_id, slot_, -1 FROM agents WHERE id = OLD.agent_id
        ON CONFLICT (account_id, slot) DO UPDATE SET live = c.live - 1;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status IN ('queued', 'claimed', 'running') THEN
        INSERT INTO account_live_runs AS c (account_id, slot, live)
        SELECT account_id, slot_, 1 FROM agents WHERE id = NEW.agent_id
        ON CONFLICT (account_id, slot) DO UPDATE SET live = c.live + 1;
    END IF;
    RETURN NULL;
END
$$;
-- A run's children by their parent (deleting an agent's runs checks each one's children), as
-- SQLite's version 24 has it.
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE TRIGGER runs_live_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.status IN ('queued', 'claimed', 'running')) EXECUTE FUNCTION runs_live_count();
CREATE TRIGGER runs_live_update AFTER UPDATE OF status, agent_id ON runs FOR EACH ROW
    WHEN ((OLD.status IN ('queued', 'claimed', 'running')) <> (NEW.status IN ('queued', 'claimed', 'running'))
          OR (OLD.agent_id <> NEW.agent_id AND OLD.status IN ('queued', 'claimed', 'running')))
    EXECUTE FUNCTION runs_live_count();
CREATE TRIGGER runs_live_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.status IN ('queued', 'claimed', 'running')) EXECUTE FUNCTION runs_live_count();

-- Version 24: each account's runs in flight (queued, claimed or running, over all its agents: a
-- run is its agent's account's) kept as a count, so the check before a turn is queued
-- (server/store/turns.py in_flight, --max-runs-in-flight) reads one row, where counting the runs
-- walked the account's queue: 48 ms a MessageSession at 50,000 queued (docs/performance.md,
-- "What still grows with the queue: the accept"). Triggers move it in the statement that moves
-- a run's status, so the count and the runs commit or roll back together. PostgreSQL spreads an
-- account's count over slots summed on read (schema/postgres/0024_live_runs.sql); here one
-- writer means one slot, 0.
CREATE TABLE account_live_runs (
    account_id TEXT NOT NULL,
    slot       INTEGER NOT NULL,
    live       INTEGER NOT NULL, -- the slot's share of the count (the sum is the count)
    PRIMARY KEY (account_id, slot)
) STRICT, WITHOUT ROWID;
INSERT INTO account_live_runs (account_id, slot, live)
SELECT a.account_id, 0, count(*) FROM runs r JOIN agents a ON a.id = r.agent_id
WHERE r.status IN ('queued', 'claimed', 'running') GROUP BY a.account_id;
-- With triggers on runs, SQLite compiles into every INSERT INTO runs the parent-key side of the
-- runs.parent_run_id foreign key (run only when the statement has left a violation pending), a
-- scan of runs without this index; deleting an agent's runs looks up each one's children the same
-- way. Most runs are roots, so the index holds children only.
CREATE INDEX runs_by_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
CREATE TRIGGER runs_live_insert AFTER INSERT ON runs
WHEN NEW.status IN ('queued', 'claimed', 'running')
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, 1 FROM agents WHERE id = NEW.agent_id
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;
CREATE TRIGGER runs_live_update AFTER UPDATE OF status, agent_id ON runs
WHEN (OLD.status IN ('queued', 'claimed', 'running')) != (NEW.status IN ('queued', 'claimed', 'running'))
  OR (OLD.agent_id != NEW.agent_id AND OLD.status IN ('queued', 'claimed', 'running'))
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, -1 FROM agents WHERE id = OLD.agent_id AND OLD.status IN ('queued', 'claimed', 'running')
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, 1 FROM agents WHERE id = NEW.agent_id AND NEW.status IN ('queued', 'claimed', 'running')
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;
CREATE TRIGGER runs_live_delete AFTER DELETE ON runs
WHEN OLD.status IN ('queued', 'claimed', 'running')
BEGIN
    INSERT INTO account_live_runs (account_id, slot, live)
    SELECT account_id, 0, -1 FROM agents WHERE id = OLD.agent_id
    ON CONFLICT (account_id, slot) DO UPDATE SET live = account_live_runs.live + excluded.live;
END;

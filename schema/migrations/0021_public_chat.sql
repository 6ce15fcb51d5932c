-- Version 21: public chat (the storage design's `public_chat`): any signed account may chat with
-- the agent in sessions of its own, within limits its owner sets (docs/protocol.md, "Public chat").
-- agents.public_chat: NULL while closed, else DAG-CBOR {messagesPerHour, tokensPerDay,
-- tokensPerDayAll, tools}. sessions.visitor_id: the account whose visitor session it is (NULL for
-- every other session); only that account and the owner see it.
ALTER TABLE agents ADD COLUMN public_chat BLOB;
ALTER TABLE sessions ADD COLUMN visitor_id TEXT;
CREATE INDEX sessions_by_visitor ON sessions (agent_id, visitor_id, updated_at DESC, id DESC)
    WHERE visitor_id IS NOT NULL;
-- What each visitor of an agent spent, in fixed windows: messages in the clock hour starting at
-- hour_start, tokens in the UTC day starting at day_start (reserved when a message is admitted,
-- the unused part given back when its run ends). account_id '' is all visitors of the agent
-- together. A row is locked while a message is admitted, so servers sharing a store count one
-- at a time.
CREATE TABLE visitor_usage (
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    hour_start INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    day_start  INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    PRIMARY KEY (agent_id, account_id)
) STRICT, WITHOUT ROWID;
-- A visitor run's reservation: the most tokens it may use, charged to day_start's window.
CREATE TABLE visitor_runs (
    run_id     TEXT NOT NULL PRIMARY KEY,
    agent_id   TEXT NOT NULL,
    account_id TEXT NOT NULL,
    reserved   INTEGER NOT NULL,
    day_start  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Version 3: the shapes of CONTRACT section 4 (the activity rollup of the storage design,
-- public read, collaborators, ids for redacted providers and secrets).

-- AgentInfo.publicRead, and the agent's activity rollup: the latest transcript activity across
-- its sessions, written with every appended event (AgentInfo.activity; NULL until the first).
ALTER TABLE agents ADD COLUMN public_read INTEGER NOT NULL DEFAULT 0 CHECK (public_read IN (0, 1));
ALTER TABLE agents ADD COLUMN activity_at INTEGER;
ALTER TABLE agents ADD COLUMN activity_kind TEXT;
ALTER TABLE agents ADD COLUMN activity_session_id TEXT;
ALTER TABLE agents ADD COLUMN message_at INTEGER;
ALTER TABLE agents ADD COLUMN message_from TEXT CHECK (message_from IN ('user', 'assistant'));

-- The session's half of the rollup: its latest message (SessionInfo.activity).
ALTER TABLE sessions ADD COLUMN message_at INTEGER;
ALTER TABLE sessions ADD COLUMN message_from TEXT CHECK (message_from IN ('user', 'assistant'));

-- Pending invitations and accepted grants on an agent; its content stays under the owner.
CREATE TABLE agent_collaborators (
    agent_id    TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    account_id  TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('reader', 'writer')),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'accepted')),
    accepted_at INTEGER, -- NULL while pending
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (agent_id, account_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX agent_collaborators_by_account ON agent_collaborators (account_id, status, updated_at DESC);

-- AgentInfo.busy: "does this agent have a queued or running run?" through a small index.
CREATE INDEX runs_active_by_agent ON runs (agent_id) WHERE status IN ('queued', 'running');

-- RedactedModelProvider.id and RedactedSecret.id: a UUID v4 made when the row is created and
-- kept by every later upsert. ADD COLUMN cannot fill a fresh random value per row, so rows made
-- before version 3 get one here: 16 random bytes shaped as a UUID v4 (version nibble 4, variant
-- 8-b taken from a random nibble). The column stays nullable only because ADD COLUMN cannot add
-- NOT NULL without a constant default; the server writes it on every insert.
ALTER TABLE model_providers ADD COLUMN id TEXT;
UPDATE model_providers SET id = hex(randomblob(16));
UPDATE model_providers SET id = lower(substr(id, 1, 8) || '-' || substr(id, 9, 4) || '-4' || substr(id, 14, 3)
    || '-' || substr('89ab', 1 + (instr('0123456789ABCDEF', substr(id, 17, 1)) - 1) % 4, 1)
    || substr(id, 18, 3) || '-' || substr(id, 21, 12));
CREATE UNIQUE INDEX model_providers_by_id ON model_providers (id);

ALTER TABLE secrets ADD COLUMN id TEXT;
UPDATE secrets SET id = hex(randomblob(16));
UPDATE secrets SET id = lower(substr(id, 1, 8) || '-' || substr(id, 9, 4) || '-4' || substr(id, 14, 3)
    || '-' || substr('89ab', 1 + (instr('0123456789ABCDEF', substr(id, 17, 1)) - 1) % 4, 1)
    || substr(id, 18, 3) || '-' || substr(id, 21, 12));
CREATE UNIQUE INDEX secrets_by_id ON secrets (id);

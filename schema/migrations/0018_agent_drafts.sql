-- Version 18: agent drafts, as the reference's `agent_drafts`: a document an agent writes with the
-- `draft.*` commands of `write hm://`, kept here until `draft.publish` sends it to the HM server.
-- `content` is the draft's blocks (the API's block nodes) and `metadata` its attributes, both
-- DAG-CBOR; `status` idle | published | deleted (a deleted draft is kept, as the reference does,
-- and no longer found); `edit_target` the hm:// document it revises, else `path_name` where a new
-- one goes. One agent's drafts go with the agent.
CREATE TABLE agent_drafts (
    id                TEXT NOT NULL PRIMARY KEY,
    account_id        TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    title             TEXT,
    content_format    TEXT NOT NULL,
    content           BLOB NOT NULL,
    metadata          BLOB,
    edit_target       TEXT,
    location_target   TEXT,
    path_name         TEXT,
    visibility        TEXT,
    status            TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    published_at      INTEGER,
    published_id      TEXT,
    published_version TEXT
) STRICT;
CREATE INDEX agent_drafts_agent_updated ON agent_drafts (account_id, agent_id, updated_at);

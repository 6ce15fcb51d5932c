-- Version 14: the publication queue. What the Seed hypermedia server did not take (it did not
-- answer, or answered 5xx) waits here and is retried with backoff by whichever server of a
-- cluster holds its lease (server/hypermedia/publications.py). `kind` 'blobs': the signed blobs,
-- ready (an identity's account or profile); 'document': an agent's Markdown to publish at
-- `subject`, built when the server answers (its current version is the diff's base). Items of
-- one (account, subject) go out one at a time, in (created_at, seq) order.
CREATE TABLE hm_publications (
    id               TEXT NOT NULL PRIMARY KEY,
    account_id       TEXT NOT NULL,
    subject          TEXT NOT NULL,   -- 'identity:<name>' or the document's hm:// address
    seq              INTEGER NOT NULL,
    kind             TEXT NOT NULL,   -- 'blobs' | 'document'
    identity_name    TEXT NOT NULL,   -- the signing identity it publishes as
    agent_id         TEXT,            -- the agent that wrote it (a document), checked again when sent
    what             TEXT NOT NULL,   -- a few words for people: "the new account", "the profile"
    body             BLOB NOT NULL,   -- DAG-CBOR: {blobs: [{cid, data}]} or {markdown, ts}
    server_url       TEXT NOT NULL,
    status           TEXT NOT NULL,   -- 'pending' | 'failed' (refused: kept to be seen, not retried)
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    last_error       TEXT,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX hm_publications_due ON hm_publications (status, next_attempt_at);
CREATE INDEX hm_publications_subject ON hm_publications (account_id, subject, created_at, seq);

-- Version 6: files (memory, attachments, uploads). Bytes live here, not on a server's disk:
-- content-addressed blobs (sha256) split into chunks, referenced by memory files and session
-- attachments, counted in `refs` so the last reference's delete frees the blob in its own
-- transaction; a staged upload is a blob without a hash yet (docs/protocol.md, "Files").
CREATE TABLE file_blobs (
    id         INTEGER PRIMARY KEY,
    sha256     BLOB UNIQUE, -- 32 bytes; NULL while an upload is staged
    size       INTEGER NOT NULL,
    refs       INTEGER NOT NULL DEFAULT 0 CHECK (refs >= 0), -- memory files + attachments naming it
    created_at INTEGER NOT NULL
) STRICT;

-- Chunks of a blob in order; `start` is the byte offset of the chunk, so a ranged read reads only
-- the chunks it needs, one at a time.
CREATE TABLE file_chunks (
    blob_id INTEGER NOT NULL REFERENCES file_blobs (id),
    seq     INTEGER NOT NULL,
    start   INTEGER NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (blob_id, seq)
) STRICT;

-- Agent memory: one row per file; directories are the prefixes of file paths.
CREATE TABLE memory_files (
    id         INTEGER PRIMARY KEY,
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    account_id TEXT NOT NULL, -- the agent's owner: quotas count per account
    path       TEXT NOT NULL,
    blob_id    INTEGER NOT NULL REFERENCES file_blobs (id),
    size       INTEGER NOT NULL,
    is_text    INTEGER NOT NULL, -- 1: clean UTF-8 (indexed for search, read back as text)
    updated_at INTEGER NOT NULL,
    UNIQUE (agent_id, path)
) STRICT;
CREATE INDEX memory_files_by_blob ON memory_files (blob_id);
CREATE INDEX memory_files_by_account ON memory_files (account_id);

-- Full-text search over text memory files (rowid = memory_files.id); PostgreSQL uses tsvector.
CREATE VIRTUAL TABLE memory_search USING fts5 (agent_id UNINDEXED, path, body, tokenize = 'unicode61');

CREATE TABLE session_attachments (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    id         TEXT NOT NULL, -- sha256 hex of the bytes
    account_id TEXT NOT NULL, -- the session's owner
    blob_id    INTEGER NOT NULL REFERENCES file_blobs (id),
    name       TEXT NOT NULL,
    mime_type  TEXT,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
) STRICT, WITHOUT ROWID;
CREATE INDEX session_attachments_by_blob ON session_attachments (blob_id);
CREATE INDEX session_attachments_by_account ON session_attachments (account_id);

-- Chunked uploads in progress; their bytes are the chunks of `blob_id` (a blob with no hash yet).
CREATE TABLE file_uploads (
    id            TEXT NOT NULL PRIMARY KEY,
    account_id    TEXT NOT NULL, -- who uploads: only this account may append, commit or abort
    owner_account TEXT NOT NULL, -- whose quota it counts against (the agent's owner)
    blob_id       INTEGER NOT NULL REFERENCES file_blobs (id),
    kind          TEXT NOT NULL CHECK (kind IN ('memory', 'session-attachment')),
    agent_id      TEXT NOT NULL,
    session_id    TEXT,
    path          TEXT, -- memory target
    name          TEXT, -- attachment target
    mime_type     TEXT,
    size          INTEGER NOT NULL,
    received      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX file_uploads_by_account ON file_uploads (account_id);
CREATE INDEX file_uploads_by_owner ON file_uploads (owner_account);
CREATE INDEX file_uploads_by_age ON file_uploads (updated_at);
CREATE INDEX file_uploads_by_agent ON file_uploads (agent_id);
CREATE INDEX file_uploads_by_session ON file_uploads (session_id);

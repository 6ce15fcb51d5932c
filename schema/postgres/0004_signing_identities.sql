-- Version 4: signing identities, as SQLite's version 5 (schema/migrations/0005_signing_identities.sql).
CREATE TABLE signing_identities (
    account_id  TEXT NOT NULL,
    name        TEXT NOT NULL,
    id          TEXT NOT NULL,
    identity_id TEXT NOT NULL,
    sealed_seed BYTEA NOT NULL,   -- nonce || AES-256-GCM ciphertext || tag, the AAD naming the row
    label       TEXT,
    icon        TEXT,
    server_url  TEXT,
    origin      TEXT NOT NULL CHECK (origin IN ('created', 'imported')),
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (account_id, name)
);
CREATE UNIQUE INDEX signing_identities_by_id ON signing_identities (id);

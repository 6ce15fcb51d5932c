-- Version 5: signing identities (CONTRACT section 8). An identity is an Ed25519 Seed account key
-- the server holds for one account's agents; its seed is sealed with the secrets key like a
-- secret (nonce || AES-256-GCM ciphertext || tag, the AAD naming the row) and never returned.
-- Agents name identities by `name` in their definition (signingKey, signingKeys).
CREATE TABLE signing_identities (
    account_id  TEXT NOT NULL,    -- the owning account: the only one that may list all, use or delete it
    name        TEXT NOT NULL,    -- hm-account-<first 16 characters of identity_id>
    id          TEXT NOT NULL,    -- UUID v4 (SigningIdentity.id)
    identity_id TEXT NOT NULL,    -- the key's own account id, z6Mk... (SigningIdentity.accountId)
    sealed_seed BLOB NOT NULL,
    label       TEXT,
    icon        TEXT,             -- ipfs://<cid> of the avatar on the published profile
    server_url  TEXT,             -- the HM server the profile went to; NULL: never published
    origin      TEXT NOT NULL CHECK (origin IN ('created', 'imported')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, name)
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX signing_identities_by_id ON signing_identities (id);

-- Version 9: hostile clients, round three (SQLite's version 10). A capability may carry an
-- expiry (Unix ms): past it the signer is no longer registered; NULL: it does not expire.
ALTER TABLE account_signers ADD COLUMN expires_at BIGINT;

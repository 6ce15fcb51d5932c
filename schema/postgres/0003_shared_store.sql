-- Version 3: the server's own store functions run on PostgreSQL as on SQLite (one set of
-- queries for both drivers, server/storage/dialect.py), so a flag is an integer 0/1 here too.
ALTER TABLE agents ALTER COLUMN public_read DROP DEFAULT;
ALTER TABLE agents ALTER COLUMN public_read TYPE INTEGER USING (CASE WHEN public_read THEN 1 ELSE 0 END);
ALTER TABLE agents ALTER COLUMN public_read SET DEFAULT 0;

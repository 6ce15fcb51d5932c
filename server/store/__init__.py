"""The store: one SQLite file behind a schema gate, one writer thread, plain query functions.

- `gate`: open a file only at the schema version this build knows (create, migrate or refuse).
- `database.Database`: the async façade; reads on the caller's thread, writes group-committed.
- `accounts`, `signatures`, `idempotency`, `providers`, `secrets_table`, `agents`, `sessions`,
  `events`, `runs`: query functions taking an apsw connection first, returning contract-shaped
  dicts (camelCase, optional fields omitted).
- `secrets`: the secrets key and AES-256-GCM sealing of secret values.
"""

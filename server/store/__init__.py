"""The store: plain query functions, written once against the storage port
(server/database/port.py) and run by whichever backend's façade the storage URL picks
(server/database/sqlite/, server/database/postgres/).

- `accounts`, `signatures`, `idempotency`, `providers`, `secrets_table`, `agents`, `sessions`,
  `events`, `runs`, ...: query functions taking a `port.Conn` first, returning contract-shaped
  dicts (camelCase, optional fields omitted). Where the backends differ they read `conn.traits`.
- `secrets`: the secrets key and AES-256-GCM sealing of secret values.
- `leases`: the run leases of the leased run queue; only a backend whose traits say it holds
  leases (PostgreSQL) has the columns, and only the runtime's leased strategy calls them.
- `codec`, `errors`: helpers the queries share.

May import: protocol, server.database.
"""

"""`seed-agents import REFERENCE_DATA_DIR`: a reference (TypeScript) Seed agents server's data
directory brought into this server's store, SQLite or PostgreSQL (docs/operations.md, "Moving
from the reference server").

- `reference.py`: the reference's database opened read-only and checked (integrity, schema
  version, tables and columns) before anything is read; its rows, each CBOR column decoded as
  untrusted input (an error names the table and the row); its secrets key; the files of its
  data folder (memory, session attachments).
- `convert.py`: one reference row into our rows, checked by our own rules (the action parsers);
  a row that breaks one is skipped with a reason, never half-written.
- `events.py`: the hot path: a unit of session events read, checked and made into our rows, in
  the import process or in worker processes (`--jobs`), a few units ahead of the writer.
- `command.py`: the command: the units, each written in one transaction (so a crash or Ctrl-C
  loses at most the unit in flight, and a second run resumes where the first stopped), the
  progress line, `--dry-run`, the summary table and the check. Its SQL is in
  `server/store/imports.py`.

May import: protocol, server.store, server.database, server.config, server.triggers (a schedule's first slot).
"""

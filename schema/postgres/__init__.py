"""The PostgreSQL schema: numbered migrations `NNNN_*.sql`, applied in order by the gate.

PostgreSQL keeps its own version sequence (in the `schema_version` table), separate from
SQLite's `PRAGMA user_version`: version 1 mirrors SQLite version 2 plus run leases, version 2
mirrors SQLite versions 3 and 4, version 3 makes flags integers (the store functions
are shared). A change to the SQLite schema needs a PostgreSQL migration that
mirrors it (tests/test_storage_postgres.py checks every table and column).
"""
from __future__ import annotations

import re
from importlib import resources

CURRENT_VERSION = 3
# Written into schema_version.app, so the gate can tell our schema from someone else's table.
APP = "seed-agents"

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str]]:
    """[(version, sql)] ascending; applying entry v to a database at v-1 brings it to v."""
    found: list[tuple[int, str]] = []
    for entry in resources.files(__name__).iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _ in found]
    if versions != list(range(1, CURRENT_VERSION + 1)):
        raise RuntimeError(f"PostgreSQL migrations must be numbered 1..{CURRENT_VERSION}, found {versions}")
    return found

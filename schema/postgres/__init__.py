"""The PostgreSQL schema: numbered migrations `NNNN_*.sql`, applied in order by the gate.

PostgreSQL keeps its own version sequence (in the `schema_version` table), separate from
SQLite's `PRAGMA user_version`: version 1 mirrors SQLite version 2 plus run leases, version 2
mirrors SQLite versions 3 and 4, version 3 makes flags integers (the store functions
are shared). A change to the SQLite schema needs a PostgreSQL migration that
mirrors it (tests/server/database/test_storage_postgres.py checks every table and column).
"""
from __future__ import annotations

from importlib import resources

from .. import numbered_migrations

CURRENT_VERSION = 25
# Written into schema_version.app, so the gate can tell our schema from someone else's table.
APP = "seed-agents"


def migrations() -> list[tuple[int, str]]:
    """PostgreSQL's migrations, [(version, sql)] ascending."""
    return numbered_migrations(resources.files(__name__), CURRENT_VERSION, "PostgreSQL")

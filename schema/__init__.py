"""The database schema: a baseline for fresh databases and ordered migrations for old ones.

The schema version is `PRAGMA user_version`. Version N is reached by applying
`migrations/NNNN_*.sql` for 1..N in order to an empty database, or `baseline.sql` in one step;
the two must produce the same schema (tests/schema/test_schema_baseline.py). The SQL files hold DDL
(and the backfill a new column needs, e.g. version 3's ids); never `PRAGMA user_version`:
whoever applies them (seed_agents.server.database.sqlite.gate) sets it, so the number lives in one place.
"""
from __future__ import annotations

import re
from importlib import resources

CURRENT_VERSION = 25

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def baseline_sql() -> str:
    """DDL creating a fresh database at CURRENT_VERSION."""
    return resources.files(__name__).joinpath("baseline.sql").read_text(encoding="utf-8")


def numbered_migrations(folder, current: int, what: str) -> list[tuple[int, str]]:
    """[(version, sql)] of the `NNNN_*.sql` files in `folder` (an importlib.resources
    Traversable), ascending; applying entry v to a database at v-1 brings it to v."""
    found: list[tuple[int, str]] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _ in found]
    # A gap or a stray number would make some old database unreachable: fail loudly at import use.
    if versions != list(range(1, current + 1)):
        raise RuntimeError(f"{what} migrations must be numbered 1..{current}, found {versions}")
    return found


def migrations() -> list[tuple[int, str]]:
    """SQLite's migrations, [(version, sql)] ascending."""
    return numbered_migrations(resources.files(__name__).joinpath("migrations"), CURRENT_VERSION, "schema")

"""The schema gate for PostgreSQL, with the refusals of every gate (seed_agents.server.database.errors).

The version lives in a one-row table `schema_version (version, app)` in the connection's
schema (the first of its search_path). Under a transaction-scoped advisory lock, so servers
starting together take turns:

- no schema_version and no tables: create version CURRENT (every migration, one transaction);
- no schema_version but other tables: a foreign database, refused;
- schema_version of another app, or unreadable: refused;
- older: each missing migration in its own savepoint, the batch in one transaction;
- newer or unknown: refused.

A refusal raises seed_agents.server.database.errors.SchemaGateError (exit status 2) naming both versions and
the redacted URL, and changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import psycopg

import seed_agents.schema.postgres as pg_schema

from ..errors import SchemaGateError, SchemaMigrationError


class PgSchemaGateError(SchemaGateError):
    """SchemaGateError for a PostgreSQL schema: `path` is the redacted URL."""

    def __init__(self, where: str, found: int | None, expected: int, reason: str) -> None:
        super().__init__(where, found, expected, reason)
        shown = "unreadable" if found is None else str(found)
        self.args = (f"database {where}: {reason} (schema version found: {shown}, "
                     f"this build expects: {expected}); nothing was changed",)


class PgSchemaMigrationError(PgSchemaGateError, SchemaMigrationError):
    """A migration failed; its transaction was rolled back, so the schema is as it was."""


# pg_advisory_xact_lock key: "seed-agents schema gate", as a stable 64-bit number.
_GATE_LOCK = 0x5EED_A6E7_5C4E_0A7E & 0x7FFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class PgSchemaTarget:
    version: int
    migrations: tuple[tuple[int, str], ...]

    @classmethod
    def current(cls) -> PgSchemaTarget:
        return cls(pg_schema.CURRENT_VERSION, tuple(pg_schema.migrations()))


async def pass_gate(conn: psycopg.AsyncConnection, display: str,
                    target: PgSchemaTarget | None = None) -> int:
    """Bring the connection's schema to the target version or raise SchemaGateError.

    `conn` must be in autocommit mode; the gate opens its own transaction."""
    target = target or PgSchemaTarget.current()
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_GATE_LOCK,))
            start = await _plan(conn, display, target)
            if start is None:
                return target.version
            for version, sql in target.migrations:
                if version <= start:
                    continue
                try:
                    async with conn.transaction():  # a savepoint
                        await conn.execute(sql)
                except psycopg.Error as exc:
                    raise PgSchemaMigrationError(display, start, target.version,
                                               f"migration to version {version} failed: {_first_line(exc)}") from None
            if start == 0:
                await conn.execute("CREATE TABLE schema_version (one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),"
                                   " version INTEGER NOT NULL, app TEXT NOT NULL)")
                await conn.execute("INSERT INTO schema_version (version, app) VALUES (%s, %s)",
                                   (target.version, pg_schema.APP))
            else:
                await conn.execute("UPDATE schema_version SET version = %s", (target.version,))
    except SchemaGateError:
        raise
    except psycopg.Error as exc:
        raise PgSchemaGateError(display, None, target.version, f"cannot check the schema: {_first_line(exc)}") from None
    return target.version


async def _plan(conn: psycopg.AsyncConnection, display: str, target: PgSchemaTarget) -> int | None:
    """The version to start from (0 = empty schema), or None when already at target."""
    cur = await conn.execute(
        "SELECT to_regclass(quote_ident(current_schema()) || '.schema_version') IS NOT NULL,"
        " (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "  WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')),"
        " current_schema()")
    has_version, relations, current = await cur.fetchone()
    if current is None:
        raise PgSchemaGateError(display, None, target.version, "no schema to use (search_path names none that exists)")
    if not has_version:
        if relations:
            raise PgSchemaGateError(display, None, target.version,
                                  f"foreign database: schema {current!r} has tables but no seed-agents schema_version")
        return 0
    try:
        async with conn.transaction():  # a savepoint: a foreign schema_version must not abort the gate's
            cur = await conn.execute("SELECT version, app FROM schema_version")
            rows = await cur.fetchall()
    except psycopg.Error:
        raise PgSchemaGateError(display, None, target.version,
                              "foreign database: its schema_version table is not seed-agents'") from None
    if len(rows) != 1 or rows[0][1] != pg_schema.APP or not isinstance(rows[0][0], int):
        raise PgSchemaGateError(display, None, target.version,
                              "foreign database: its schema_version table is not seed-agents'")
    version = rows[0][0]
    if version == target.version:
        return None
    have = {v for v, _ in target.migrations}
    if 0 < version < target.version and have >= set(range(version + 1, target.version + 1)):
        return version
    if version > target.version:
        reason = "schema is newer than this build; upgrade the server or restore a backup"
    else:
        reason = "unknown schema version"
    raise PgSchemaGateError(display, version, target.version, reason)


def _first_line(exc: BaseException) -> str:
    # psycopg errors carry the server's message; the connection string is never part of them.
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__

"""Who owns a row, from the primary key and the account_id column alone.

The ownership check runs before anything else of the row is read, so a foreign id costs the same
as a missing one: no definition is decoded, no large column is touched (handlers/access.py).
"""
from __future__ import annotations

import apsw


def _owner(conn: apsw.Connection, sql: str, row_id: str) -> str | None:
    row = conn.execute(sql, (row_id,)).fetchone()
    return None if row is None else row[0]


def agent_owner(conn: apsw.Connection, agent_id: str) -> str | None:
    return _owner(conn, "SELECT account_id FROM agents WHERE id = ?", agent_id)


def session_owner(conn: apsw.Connection, session_id: str) -> str | None:
    return _owner(conn, "SELECT account_id FROM sessions WHERE id = ?", session_id)


def run_owner(conn: apsw.Connection, run_id: str) -> str | None:
    return _owner(conn, "SELECT account_id FROM runs WHERE id = ?", run_id)

"""Who owns a row, from the primary key and small columns alone.

The access check (handlers/access.py) runs before anything else of the row is read, so a
foreign id never decodes a definition nor touches a large column.
"""
from __future__ import annotations

from ..database.port import Conn


def agent_access(conn: Conn, agent_id: str) -> tuple[str, bool] | None:
    """(owning account, public read) of an agent, or None."""
    row = conn.execute("SELECT account_id, public_read FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return None if row is None else (row[0], bool(row[1]))


def session_access(conn: Conn, session_id: str) -> tuple[str, str] | None:
    """(owning account, agent id) of a session, or None."""
    row = conn.execute("SELECT account_id, agent_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def run_access(conn: Conn, run_id: str) -> tuple[str, str] | None:
    """(owning account, agent id) of a run, or None."""
    row = conn.execute("SELECT account_id, agent_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else (row[0], row[1])

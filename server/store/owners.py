"""Who owns a row, from the primary key and small columns alone.

The access check (handlers/access.py) runs before anything else of the row is read, so a
foreign id never decodes a definition nor touches a large column.
"""
from __future__ import annotations

from ..database.port import Conn


def agent_access(conn: Conn, agent_id: str) -> tuple[str, bool] | None:
    """(owning account, public read) of an agent, or None."""
    row = agent_flags(conn, agent_id)
    return None if row is None else (row[0], row[1])


def agent_flags(conn: Conn, agent_id: str) -> tuple[str, bool, bool] | None:
    """(owning account, public read, public chat) of an agent, or None."""
    row = conn.execute("SELECT account_id, public_read, public_chat IS NOT NULL FROM agents WHERE id = ?",
                       (agent_id,)).fetchone()
    return None if row is None else (row[0], bool(row[1]), bool(row[2]))


def session_access(conn: Conn, session_id: str) -> tuple[str, str, str | None] | None:
    """(owning account, agent id, visitor or None) of a session, or None."""
    row = conn.execute("SELECT account_id, agent_id, visitor_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def run_access(conn: Conn, run_id: str) -> tuple[str, str, str | None] | None:
    """(owning account, agent id, session id or None) of a run, or None."""
    row = conn.execute("SELECT account_id, agent_id, session_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])

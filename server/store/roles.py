"""An account's role on an agent, and whether anyone besides its owner may drive it: the reads
behind the access model (handlers/access.py raises on them; the tools' authority asks them
directly, server/tools/authority.py). Indexed reads only: agents and agent_collaborators by
primary key."""
from __future__ import annotations

from ..storage.port import Conn
from . import collaborators as collab_q
from . import owners as owners_q

OWNER, WRITER, READER = "owner", "writer", "reader"


def guest_role(conn: Conn, account_id: str, agent_id: str, public_read: bool) -> str | None:
    """The role of an account that does not own the agent: its accepted grant, else `reader`
    when the agent is public, else None (a pending invitation gives nothing)."""
    grant = collab_q.accepted_role(conn, agent_id, account_id)
    if grant is not None:
        return grant
    return READER if public_read else None


def agent_role(conn: Conn, account_id: str, agent_id: str) -> str | None:
    """The caller's role on an agent, or None (no such agent, or no access)."""
    row = owners_q.agent_access(conn, agent_id)
    if row is None:
        return None
    owner, public_read = row
    if owner == account_id:
        return OWNER
    return guest_role(conn, account_id, agent_id, public_read)


def is_shared(conn: Conn, agent_id: str) -> bool:
    """Public read is on, or some other account holds (or is offered) a role on the agent."""
    row = owners_q.agent_access(conn, agent_id)
    if row is None:
        return False
    if row[1]:
        return True
    return conn.execute("SELECT 1 FROM agent_collaborators WHERE agent_id = ? LIMIT 1", (agent_id,)).fetchone() \
        is not None

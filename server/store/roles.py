"""An account's role on an agent, and whether anyone besides its owner may drive it: the reads
behind the access model (handlers/access.py raises on them; the tools' authority asks them
directly, server/tools/authority.py). Indexed reads only: agents and agent_collaborators by
primary key."""
from __future__ import annotations

from ..database.port import Conn
from . import collaborators as collab_q
from . import owners as owners_q
from . import visitors as visitors_q

OWNER, WRITER, READER = "owner", "writer", "reader"
# Any signed account on an agent whose owner opened public chat (and who has no other role): it
# may chat in sessions of its own and see nothing else of the agent (docs/protocol.md, "Public chat").
VISITOR = "visitor"


def guest_role(conn: Conn, account_id: str, agent_id: str, public_read: bool) -> str | None:
    """The role of an account that does not own the agent: its accepted grant, else `reader`
    when the agent is public, else None (a pending invitation gives nothing)."""
    grant = collab_q.accepted_role(conn, agent_id, account_id)
    if grant is not None:
        return grant
    return READER if public_read else None


def agent_role(conn: Conn, account_id: str, agent_id: str) -> str | None:
    """The caller's role on an agent, or None (no such agent, or no access)."""
    flags = owners_q.agent_flags(conn, agent_id)
    if flags is None or flags[0] == account_id:
        return agent_role_from(account_id, flags, None)
    return agent_role_from(account_id, flags, collab_q.accepted_role(conn, agent_id, account_id))


def agent_role_from(account_id: str, flags: tuple[str, bool, bool] | None, grant: str | None) -> str | None:
    """`agent_role` from what it reads: the agent's (owner, public read, public chat) and the
    account's accepted grant (read only when the account is not the owner)."""
    if flags is None:
        return None
    owner, public_read, public_chat = flags
    if owner == account_id:
        return OWNER
    role = grant if grant is not None else (READER if public_read else None)
    return VISITOR if role is None and public_chat else role


def may_visit(role: str | None) -> bool:
    """Whether a role chats with the agent as a visitor: it cannot write to the agent, and public
    chat is open (a reader of a public agent with public chat open is a visitor in its sessions)."""
    return role in (VISITOR, READER)


def is_shared(conn: Conn, agent_id: str) -> bool:
    """Public read is on, or some other account holds (or is offered) a role on the agent."""
    row = owners_q.agent_access(conn, agent_id)
    if row is None:
        return False
    if row[1]:
        return True
    return conn.execute("SELECT 1 FROM agent_collaborators WHERE agent_id = ? LIMIT 1", (agent_id,)).fetchone() \
        is not None


def _role_through_agent(conn: Conn, account_id: str, row: tuple[str, str, str | None] | None,
                        visitor: str | None) -> tuple[str | None, str | None]:
    """(role, agent id) from a row's (owning account, agent id, ...) and the visitor whose session
    it belongs to, reading the agent's flags and the account's grant only where they decide it
    (`role_through_agent`)."""
    flags = grant = None
    if row is not None and row[0] != account_id and (visitor is None or visitor == account_id):
        flags = owners_q.agent_flags(conn, row[1])
        if visitor is None and flags is not None and flags[0] != account_id:
            grant = collab_q.accepted_role(conn, row[1], account_id)
    return role_through_agent(account_id, row, visitor, flags, grant)


def role_through_agent(account_id: str, row: tuple | None, visitor: str | None,
                       flags: tuple[str, bool, bool] | None, grant: str | None) -> tuple[str | None, str | None]:
    """(role, agent id) from a row's (owning account, agent id, ...), the visitor whose session
    it belongs to, the agent's flags and the account's accepted grant: its owner at once; a
    visitor session only to its visitor while public chat is open (VISITOR), to nobody else;
    any other session to anyone else through the row's agent, except to a mere visitor;
    (None, None) for no row."""
    if row is None:
        return None, None
    owner, agent_id = row[0], row[1]
    if owner == account_id:
        return OWNER, agent_id
    if visitor is not None:
        if visitor != account_id:
            return None, agent_id
        return (VISITOR if flags is not None and flags[2] else None), agent_id
    role = agent_role_from(account_id, flags, grant)
    return (None if role == VISITOR else role), agent_id


def session_role(conn: Conn, account_id: str, session_id: str) -> tuple[str | None, str | None]:
    """(role, agent id) for a session (one primary-key read for its owner)."""
    row = owners_q.session_access(conn, session_id)
    return _role_through_agent(conn, account_id, row, row[2] if row is not None else None)


def run_role(conn: Conn, account_id: str, run_id: str) -> tuple[str | None, str | None]:
    row = owners_q.run_access(conn, run_id)
    visitor = None
    if row is not None and row[0] != account_id and row[2] is not None:
        visitor = visitors_q.visitor_of(conn, row[2])
    return _role_through_agent(conn, account_id, row, visitor)


def key_role(conn: Conn, account_id: str, kind: str, ident: str) -> tuple[str | None, str | None]:
    """(role, agent id) for what a subscription key names (agents/, sessions/ or runs/): what a
    live subscription is checked against (server/live/grants.py)."""
    if kind == "agents":
        return agent_role(conn, account_id, ident), ident
    if kind == "sessions":
        return session_role(conn, account_id, ident)
    if kind == "runs":
        return run_role(conn, account_id, ident)
    return None, None

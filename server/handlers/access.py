"""The access model in one place (CONTRACT section 4, "Access").

`agent_role` answers "what may this account do to this agent": `owner`, an accepted
collaborator's `writer` or `reader`, `reader` for anyone when the owner turned public read on,
`visitor` for any other signed account when the owner opened public chat (its own sessions
only: docs/protocol.md, "Public chat"), or None. Every handler and every subscription asks it (through the helpers below), and the live
grants index (server/live/grants.py) asks it again whenever a grant changes.

No access at all is 404 with the very text a missing id gets (it must not confirm existence);
too little is 403. The owner is read first, from the primary key and two small columns; a row is
loaded (and an agent's definition decoded) only once access is settled, so "exists, not yours"
and "does not exist" give the same answer and never decode anything.
"""
from __future__ import annotations

from seed_agents.protocol.api.actions import MAX_ID
from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..store import agents as agents_q
from ..store import roles as roles_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q

OWNER, WRITER, READER = "owner", "writer", "reader"
VISITOR = roles_q.VISITOR
_RANK = {VISITOR: 0, READER: 1, WRITER: 2, OWNER: 3}
WRITE_REQUIRED = "Write access is required"
OWNER_REQUIRED = "Only the agent owner can do this"
VISITOR_ONLY = ("A visitor of this agent (public chat) may only create sessions of its own, message them and "
                "read them")


def _not_found(kind: str, ident: str) -> ProtocolError:
    # The id as sent when it is plain printable text (parse_action bounds its length), escaped
    # otherwise, so a message cannot carry control characters of the client's choosing.
    shown = ident if ident.isprintable() and len(ident) <= MAX_ID else quote(ident, MAX_ID)
    return ProtocolError(404, f"{kind} {shown} not found")


def _load(row: dict | None, kind: str, ident: str) -> dict:
    if row is None:   # deleted between the two statements (same reader snapshot: not expected)
        raise _not_found(kind, ident)
    return row


# (the reads themselves live beside the store, where the tools' authority asks them too)
guest_role = roles_q.guest_role
agent_role = roles_q.agent_role
session_role = roles_q.session_role
run_role = roles_q.run_role
key_role = roles_q.key_role


def require(role: str | None, need: str, kind: str, ident: str) -> str:
    """`role` when it is at least `need`; 404 without access, 403 with too little. A visitor
    reads its own sessions and their runs (session_role and run_role give VISITOR for nothing
    else) and nothing of the agent itself."""
    if role is None:
        raise _not_found(kind, ident)
    if role == VISITOR:
        if need == READER and kind in ("session", "run"):
            return role
        raise ProtocolError(403, VISITOR_ONLY)
    if _RANK[role] < _RANK[need]:
        raise ProtocolError(403, WRITE_REQUIRED if need == WRITER else OWNER_REQUIRED)
    return role


def agent_access(conn, account_id: str, agent_id: str, need: str = READER) -> str:
    """The caller's role on the agent, checked against `need` (nothing is loaded)."""
    return require(agent_role(conn, account_id, agent_id), need, "agent", agent_id)


def agent_for(conn, account_id: str, agent_id: str, need: str = READER) -> dict:
    """The AgentInfo (with the caller's accessRole) once access is at least `need`."""
    role = agent_access(conn, account_id, agent_id, need)
    return _load(agents_q.get_agent(conn, agent_id, role), "agent", agent_id)


def session_access(conn, account_id: str, session_id: str, need: str = READER) -> str:
    return require(session_role(conn, account_id, session_id)[0], need, "session", session_id)


def session_for(conn, account_id: str, session_id: str, need: str = READER) -> dict:
    """The SessionInfo (the owner's row) once the caller's access is at least `need`."""
    session_access(conn, account_id, session_id, need)
    return _load(sessions_q.get_session(conn, session_id), "session", session_id)


def run_for(conn, account_id: str, run_id: str, need: str = READER) -> dict:
    require(run_role(conn, account_id, run_id)[0], need, "run", run_id)
    return _load(runs_q.get_run(conn, run_id), "run", run_id)

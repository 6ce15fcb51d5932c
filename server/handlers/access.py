"""Ownership checks: another account's resource is 404, never 403 (it must not confirm existence).

The owner is read first, from the primary key and the account_id column only; the row is loaded
(and an agent's definition decoded) only for its owner. So "exists, not yours" and "does not
exist" give the same answer at the same cost.
"""
from __future__ import annotations

from protocol.actions import MAX_ID
from protocol.errors import ProtocolError, quote
from server.store import agents as agents_q
from server.store import owners as owners_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q


def _not_found(kind: str, ident: str) -> ProtocolError:
    # The id as sent when it is plain printable text (parse_action bounds its length), escaped
    # otherwise, so a message cannot carry control characters of the client's choosing.
    shown = ident if ident.isprintable() and len(ident) <= MAX_ID else quote(ident, MAX_ID)
    return ProtocolError(404, f"{kind} {shown} not found")


def _load(row: dict | None, kind: str, ident: str) -> dict:
    if row is None:   # deleted between the two statements (same reader snapshot: not expected)
        raise _not_found(kind, ident)
    return row


def own_agent(conn, account_id: str, agent_id: str) -> dict:
    if owners_q.agent_owner(conn, agent_id) != account_id:
        raise _not_found("agent", agent_id)
    return _load(agents_q.get_agent(conn, agent_id), "agent", agent_id)


def own_session(conn, account_id: str, session_id: str) -> dict:
    if owners_q.session_owner(conn, session_id) != account_id:
        raise _not_found("session", session_id)
    return _load(sessions_q.get_session(conn, session_id), "session", session_id)


def own_run(conn, account_id: str, run_id: str) -> dict:
    if owners_q.run_owner(conn, run_id) != account_id:
        raise _not_found("run", run_id)
    return _load(runs_q.get_run(conn, run_id), "run", run_id)

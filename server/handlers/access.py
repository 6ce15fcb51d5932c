"""Ownership checks: another account's resource is 404, never 403 (it must not confirm existence)."""
from __future__ import annotations

from protocol.errors import ProtocolError
from server.store import agents as agents_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q


def own_agent(conn, account_id: str, agent_id: str) -> dict:
    agent = agents_q.get_agent(conn, agent_id)
    if agent is None or agent["account"] != account_id:
        raise ProtocolError(404, f"agent {agent_id} not found")
    return agent


def own_session(conn, account_id: str, session_id: str) -> dict:
    session = sessions_q.get_session(conn, session_id)
    if session is None or session["account"] != account_id:
        raise ProtocolError(404, f"session {session_id} not found")
    return session


def own_run(conn, account_id: str, run_id: str) -> dict:
    run = runs_q.get_run(conn, run_id)
    agent = agents_q.get_agent(conn, run["agentId"]) if run is not None else None
    if agent is None or agent["account"] != account_id:
        raise ProtocolError(404, f"run {run_id} not found")
    return run

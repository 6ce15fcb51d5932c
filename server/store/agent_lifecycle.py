"""Changing and removing whole agents: UpdateAgent's definition and DeleteAgent's one transaction.

Kept apart from store/agents.py (the agent rows and their shape) because deletion reaches every
table that hangs off an agent.
"""
from __future__ import annotations

from ..database.port import Conn
from . import codec
from . import files_lifecycle as files_q
from . import triggers as triggers_q
from . import visitors as visitors_q
from .errors import NotFound


def set_definition(conn: Conn, agent_id: str, definition: dict, now: int) -> None:
    """Replace the agent's definition; the next turn reads it."""
    conn.execute("UPDATE agents SET definition = ?, updated_at = max(updated_at, ?) WHERE id = ?",
                 (codec.encode(definition), now, agent_id))
    if conn.changes() != 1:
        raise NotFound(f"agent {agent_id} not found")


def forget_idempotency(conn: Conn, account_id: str, idents: set[str]) -> int:
    """Drop the account's idempotency records whose stored response names one of `idents` as
    its agentId or sessionId (CreateAgent, CreateSession, MessageSession answers), so a retried
    create does not answer with something deleted. One pass over the account's records."""
    doomed = []
    for action, client_id, response in conn.execute(
            "SELECT action, client_id, response FROM idempotency WHERE account_id = ?", (account_id,)):
        answer = codec.decode(response)
        if isinstance(answer, dict) and (answer.get("agentId") in idents or answer.get("sessionId") in idents):
            doomed.append((account_id, action, client_id))
    conn.executemany("DELETE FROM idempotency WHERE account_id = ? AND action = ? AND client_id = ?", doomed)
    return len(doomed)


def delete_agent(conn: Conn, agent_id: str) -> list[str]:
    """Remove the agent, its sessions and their events, its runs, its collaborators and the
    idempotency records that name them. Returns the deleted session ids. The caller runs this
    as one write job: it commits whole or not at all."""
    row = conn.execute("SELECT account_id FROM agents WHERE id = ?", (agent_id,)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    account_id = row[0]
    session_ids = [sid for (sid,) in conn.execute("SELECT id FROM sessions WHERE agent_id = ?", (agent_id,))]
    own = "SELECT id FROM sessions WHERE agent_id = ?"
    # Things of other agents that point in here are detached, as a session deletion would.
    conn.execute(f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN ({own})"
                 " AND agent_id != ?", (agent_id, agent_id))
    conn.execute(f"UPDATE runs SET session_id = NULL WHERE session_id IN ({own}) AND agent_id != ?",
                 (agent_id, agent_id))
    # (a continuation joins two sessions of one agent: both ends go)
    conn.execute(f"DELETE FROM session_continuations WHERE successor_session_id IN ({own})", (agent_id,))
    conn.execute(f"DELETE FROM session_events WHERE session_id IN ({own})", (agent_id,))
    # Its files: memory, the sessions' attachments, uploads in progress (bytes freed here too).
    files_q.delete_agent_files(conn, agent_id, session_ids)
    # One statement each: a tree's parent links are checked when the statement ends.
    conn.execute("DELETE FROM runs WHERE agent_id = ?", (agent_id,))
    conn.execute("DELETE FROM sessions WHERE agent_id = ?", (agent_id,))
    # Collaborators' own idempotency records (a writer's CreateSession) go too.
    members = [account_id, *(a for (a,) in conn.execute(
        "DELETE FROM agent_collaborators WHERE agent_id = ? RETURNING account_id", (agent_id,)))]
    for member in members:
        forget_idempotency(conn, member, {agent_id, *session_ids})
    triggers_q.delete_agent_triggers(conn, agent_id)
    conn.execute("DELETE FROM agent_drafts WHERE agent_id = ?", (agent_id,))   # (as the reference)
    visitors_q.forget_agent(conn, agent_id)   # public chat's counters
    conn.execute("DELETE FROM agents WHERE id = ?", (agent_id,))
    return session_ids


def agent_ids(conn: Conn) -> set[str]:
    """Every agent id (a start-up check of state directories; not a hot query)."""
    return {aid for (aid,) in conn.execute("SELECT id FROM agents")}


def state_dirs(conn: Conn) -> list[str]:
    return [d for (d,) in conn.execute("SELECT state_dir FROM agents")]

"""Agents: AgentInfo = {id, account, definition, stateDir, status, createdAt, updatedAt}."""
from __future__ import annotations

import apsw

from server.store import codec
from server.store.errors import NotFound

_COLUMNS = "id, account_id, definition, state_dir, status, created_at, updated_at"


def create_agent(conn: apsw.Connection, agent_id: str, account_id: str, definition: dict,
                 state_dir: str, now: int) -> dict:
    conn.execute(
        f"INSERT INTO agents ({_COLUMNS}) VALUES (?, ?, ?, ?, 'idle', ?, ?)",
        (agent_id, account_id, codec.encode(definition), state_dir, now, now))
    return {"id": agent_id, "account": account_id, "definition": definition, "stateDir": state_dir,
            "status": "idle", "createdAt": now, "updatedAt": now}


def get_agent(conn: apsw.Connection, agent_id: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return None if row is None else agent_info(row)


def list_agents(conn: apsw.Connection, account_id: str) -> list[dict]:
    """The account's agents, most recently updated first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE account_id = ? ORDER BY updated_at DESC, id",
        (account_id,)).fetchall()
    return [agent_info(row) for row in rows]


def set_agent_status(conn: apsw.Connection, agent_id: str, status: str, now: int) -> dict:
    row = conn.execute(
        f"UPDATE agents SET status = ?, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (status, now, agent_id)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent_info(row)


def touch_agent(conn: apsw.Connection, agent_id: str, now: int) -> dict:
    """Mark the agent updated (a session of it changed); returns the AgentInfo to publish."""
    # max(): a clock step backwards must not reorder "newest update first" lists.
    row = conn.execute(
        f"UPDATE agents SET updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (now, agent_id)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent_info(row)


def settle_running_agents(conn: apsw.Connection, now: int) -> int:
    """At start no run executes yet: an agent left 'running' by a dead process is 'idle'."""
    conn.execute("UPDATE agents SET status = 'idle', updated_at = max(updated_at, ?) WHERE status = 'running'",
                 (now,))
    return conn.changes()


def agent_info(row: tuple) -> dict:
    agent_id, account_id, definition, state_dir, status, created_at, updated_at = row
    return {"id": agent_id, "account": account_id, "definition": codec.decode(definition),
            "stateDir": state_dir, "status": status, "createdAt": created_at, "updatedAt": updated_at}

"""Runs: RunInfo = {id, agentId, sessionId?, status, attempt, createdAt, updatedAt, error?}.

Statuses: queued -> running -> succeeded | failed | canceled. Order among runs created in the
same millisecond falls back to rowid, i.e. insertion order, so the queue stays FIFO.
"""
from __future__ import annotations

import apsw

from server.store.errors import NotFound

_COLUMNS = "id, agent_id, session_id, status, attempt, created_at, updated_at, error"
# The WHERE of the partial index runs_active_by_session, written out verbatim: SQLite uses a
# partial index only when the query repeats its condition, so "status = 'queued'" alone would
# walk the session's whole run history.
_ACTIVE = "status IN ('queued', 'running')"


def create_run(conn: apsw.Connection, run_id: str, account_id: str, agent_id: str,
               session_id: str | None, user_event_id: str | None, now: int) -> dict:
    conn.execute(
        "INSERT INTO runs (id, account_id, agent_id, session_id, user_event_id, status, attempt,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'queued', 0, ?, ?)",
        (run_id, account_id, agent_id, session_id, user_event_id, now, now))
    return run_info((run_id, agent_id, session_id, "queued", 0, now, now, None))


def get_run(conn: apsw.Connection, run_id: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else run_info(row)


def set_run_status(conn: apsw.Connection, run_id: str, status: str, now: int,
                   error: str | None = None, attempt_inc: bool = False) -> dict:
    """Move the run to `status`; `error` replaces the previous one (None clears it), so the
    error always explains the current status."""
    row = conn.execute(
        f"UPDATE runs SET status = ?, error = ?, attempt = attempt + ?, updated_at = max(updated_at, ?)"
        f" WHERE id = ? RETURNING {_COLUMNS}",
        (status, error, 1 if attempt_inc else 0, now, run_id)).fetchone()
    if row is None:
        raise NotFound(f"run {run_id} not found")
    return run_info(row)


def _queued(rows: list) -> list[dict]:
    out = []
    for row in rows:
        info = run_info(row[:8])
        info["accountId"] = row[8]
        if row[9] is not None:
            info["userEventId"] = row[9]
        out.append(info)
    return out


def queued_runs(conn: apsw.Connection, limit: int) -> list[dict]:
    """Queued runs, oldest first, each RunInfo plus accountId and userEventId (when set)."""
    return _queued(conn.execute(
        f"SELECT {_COLUMNS}, account_id, user_event_id FROM runs WHERE status = 'queued'"
        " ORDER BY created_at, rowid LIMIT ?", (limit,)).fetchall())


def queued_runs_of_session(conn: apsw.Connection, session_id: str, limit: int) -> list[dict]:
    """The session's queued runs, oldest first (the per-session worker takes them in order)."""
    return _queued(conn.execute(
        f"SELECT {_COLUMNS}, account_id, user_event_id FROM runs WHERE session_id = ? AND {_ACTIVE}"
        " AND status = 'queued' ORDER BY created_at, rowid LIMIT ?", (session_id, limit)).fetchall())


def cancel_queued_runs_of_session(conn: apsw.Connection, session_id: str, now: int) -> list[dict]:
    """StopSession: every queued run of the session becomes 'canceled'; returns them."""
    rows = conn.execute(
        f"UPDATE runs SET status = 'canceled', updated_at = max(updated_at, ?)"
        f" WHERE session_id = ? AND {_ACTIVE} AND status = 'queued' RETURNING {_COLUMNS}",
        (now, session_id)).fetchall()
    return [run_info(row) for row in rows]


def active_runs_of_session(conn: apsw.Connection, session_id: str) -> list[dict]:
    """Queued or running runs of the session, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM runs WHERE session_id = ? AND {_ACTIVE}"
        " ORDER BY created_at, rowid", (session_id,)).fetchall()
    return [run_info(row) for row in rows]


def latest_run_of_session(conn: apsw.Connection, session_id: str) -> dict | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM runs WHERE session_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (session_id,)).fetchone()
    return None if row is None else run_info(row)


def requeue_interrupted(conn: apsw.Connection, now: int) -> list[str]:
    """Runs a dead process left 'running' go back to 'queued'; returns their ids, oldest first."""
    ids = [run_id for (run_id,) in conn.execute(
        "SELECT id FROM runs WHERE status = 'running' ORDER BY created_at, rowid")]
    conn.execute("UPDATE runs SET status = 'queued', updated_at = max(updated_at, ?) WHERE status = 'running'",
                 (now,))
    return ids


def session_status_from_runs(conn: apsw.Connection, session_id: str) -> str:
    """'streaming' while a run of the session is queued or running, 'error' when its latest run
    failed, else 'idle' (CONTRACT section 4)."""
    active = conn.execute(
        f"SELECT 1 FROM runs WHERE session_id = ? AND {_ACTIVE} LIMIT 1",
        (session_id,)).fetchone()
    if active is not None:
        return "streaming"
    latest = latest_run_of_session(conn, session_id)
    return "error" if latest is not None and latest["status"] == "failed" else "idle"


def run_info(row: tuple) -> dict:
    run_id, agent_id, session_id, status, attempt, created_at, updated_at, error = row
    info = {"id": run_id, "agentId": agent_id, "status": status, "attempt": attempt,
            "createdAt": created_at, "updatedAt": updated_at}
    if session_id is not None:
        info["sessionId"] = session_id
    if error is not None:
        info["error"] = error
    return info

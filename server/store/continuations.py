"""Session continuations (`session_continuations`, docs/protocol.md "Session continuations"): one
row per edge, the successor's, with its manifest; the sessions' `continued_from` / `continued_by`
links written with it, in the same transaction. Row = the wire's SessionContinuation:
{successorSessionId, predecessorSessionId, originSessionId, toolCallId, runId?, eventId?, reason?,
manifest, createdAt}."""
from __future__ import annotations

from ..database.port import Conn
from . import codec

_COLUMNS = ("successor_session_id, predecessor_session_id, origin_session_id, tool_call_id, run_id, event_id,"
            " reason, manifest, created_at")


def _info(row: tuple) -> dict:
    successor, predecessor, origin, call_id, run_id, event_id, reason, manifest, created_at = row
    info = {"successorSessionId": successor, "predecessorSessionId": predecessor, "originSessionId": origin,
            "toolCallId": call_id, "manifest": codec.decode(manifest), "createdAt": created_at}
    for key, value in (("runId", run_id), ("eventId", event_id), ("reason", reason)):
        if value is not None:
            info[key] = value
    return info


def of_successor(conn: Conn, session_id: str) -> dict | None:
    """The edge that made `session_id`, or None (not a successor)."""
    return edge_of(conn.execute(SUCCESSOR_ROW, (session_id,)).fetchone())


SUCCESSOR_ROW = f"SELECT {_COLUMNS} FROM session_continuations WHERE successor_session_id = ?"


def edge_of(row: tuple | None) -> dict | None:
    """`of_successor` of the row SUCCESSOR_ROW found."""
    return None if row is None else _info(row)


def of_call(conn: Conn, predecessor_id: str, tool_call_id: str) -> dict | None:
    """The successor a call already made (a retried call finds it)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM session_continuations"
                       " WHERE predecessor_session_id = ? AND tool_call_id = ?", (predecessor_id, tool_call_id)).fetchone()
    return None if row is None else _info(row)


def chain_length(conn: Conn, origin_id: str) -> int:
    return conn.execute("SELECT count(*) FROM session_continuations WHERE origin_session_id = ?",
                        (origin_id,)).fetchone()[0]


def record(conn: Conn, *, successor_id: str, predecessor_id: str, origin_id: str, account_id: str,
           tool_call_id: str, run_id: str | None, event_id: str | None, reason: str | None,
           manifest: dict, now: int) -> dict:
    """The edge, and the links on both sessions."""
    conn.execute(
        "INSERT INTO session_continuations (successor_session_id, predecessor_session_id, origin_session_id,"
        " account_id, tool_call_id, run_id, event_id, reason, manifest, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (successor_id, predecessor_id, origin_id, account_id, tool_call_id, run_id, event_id, reason,
         codec.encode(manifest), now))
    conn.execute("UPDATE sessions SET continued_from = ?, title_source = 'agent' WHERE id = ?",
                 (predecessor_id, successor_id))
    conn.execute("UPDATE sessions SET continued_by = ?, updated_at = max(updated_at, ?) WHERE id = ?",
                 (successor_id, now, predecessor_id))
    return of_successor(conn, successor_id)

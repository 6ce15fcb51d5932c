"""Sessions: SessionInfo = {id, account, agentId, title?, status, createdAt, updatedAt, activity?}.

Lists are newest update first, paged with an opaque keyset cursor (the last row's updated_at
and id), so a page costs the same however deep it is and rows never repeat across pages.
"""
from __future__ import annotations

import base64
import binascii

import apsw

from protocol.actions import MAX_SAFE_INTEGER, check_integer
from protocol.errors import quote
from server.store.errors import InvalidCursor, NotFound

_COLUMNS = "id, account_id, agent_id, title, status, created_at, updated_at, message_at, message_from"
_ORDER = "ORDER BY updated_at DESC, id"


def create_session(conn: apsw.Connection, session_id: str, account_id: str, agent_id: str,
                   title: str | None, now: int) -> dict:
    conn.execute(
        f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, 'idle', ?, ?, NULL, NULL)",
        (session_id, account_id, agent_id, title, now, now))
    return session_info((session_id, account_id, agent_id, title, "idle", now, now, None, None))


def get_session(conn: apsw.Connection, session_id: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else session_info(row)


def list_sessions(conn: apsw.Connection, account_id: str, agent_id: str | None, limit: int,
                  cursor: str | None) -> tuple[list[dict], str | None]:
    """(sessions, next cursor or None) of the account, optionally of one agent."""
    where, params = ["account_id = ?"], [account_id]
    if agent_id is not None:
        # Unary + keeps the planner on sessions_by_agent (the narrower index) for this filter.
        where, params = ["agent_id = ?", "+account_id = ?"], [agent_id, account_id]
    if cursor is not None:
        updated_at, last_id = decode_cursor(cursor)
        # "updated_at <= ?" bounds the index range; the OR skips rows already returned.
        where.append("updated_at <= ? AND (updated_at < ? OR id > ?)")
        params += [updated_at, updated_at, last_id]
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE {' AND '.join(where)} {_ORDER} LIMIT ?",
        (*params, limit + 1)).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = encode_cursor(rows[-1][6], rows[-1][0]) if more and rows else None
    return [session_info(row) for row in rows], next_cursor


def sessions_of_agent(conn: apsw.Connection, agent_id: str, limit: int) -> list[dict]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE agent_id = ? {_ORDER} LIMIT ?",
                        (agent_id, limit)).fetchall()
    return [session_info(row) for row in rows]


def set_session_status(conn: apsw.Connection, session_id: str, status: str, now: int) -> dict:
    row = conn.execute(
        f"UPDATE sessions SET status = ?, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (status, now, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return session_info(row)


def ids_with_status(conn: apsw.Connection, status: str) -> list[str]:
    """Sessions in `status` (a start-up check; not a hot query)."""
    return [sid for (sid,) in conn.execute("SELECT id FROM sessions WHERE status = ?", (status,))]


def session_info(row: tuple) -> dict:
    session_id, account_id, agent_id, title, status, created_at, updated_at = row[:7]
    info = {"id": session_id, "account": account_id, "agentId": agent_id, "status": status,
            "createdAt": created_at, "updatedAt": updated_at}
    if title is not None:
        info["title"] = title
    message_at, message_from = row[7:9]   # the session's latest message (append_event writes it)
    if message_at is not None:
        info["activity"] = {"messageAt": message_at, "messageFrom": message_from}
    return info


def encode_cursor(updated_at: int, session_id: str) -> str:
    raw = f"{updated_at}:{session_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        updated_at, session_id = raw.split(":", 1)
        # The same range check as every integer field (a crafted 2^63 here was a 500).
        return check_integer(int(updated_at), 0, MAX_SAFE_INTEGER, ValueError), session_id
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise InvalidCursor(f"invalid cursor {quote(cursor)}") from exc

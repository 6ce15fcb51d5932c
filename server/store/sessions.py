"""Sessions: SessionInfo = {id, account, agentId, title?, status, createdAt, updatedAt,
parentSessionId?, runId?, childSessionCount?, modelOverride?, description?, activity?, plan?,
continuedFromSessionId?, continuedBySessionId?, thoroughness?}.

Lists are newest update first, paged with a keyset cursor {updatedBefore, idBefore} (the last
row's updated_at and id, ordered both descending), so a page costs the same however deep it is
and rows sharing one updated_at millisecond are neither lost nor repeated across pages.
"""
from __future__ import annotations

from seed_agents.protocol.agent import plans

from ..database.port import Conn
from . import codec
from . import runs as runs_q
from . import files_lifecycle as files_q
from .errors import InvalidCursor, NotFound

_COLUMNS = ("id, account_id, agent_id, title, status, created_at, updated_at, parent_session_id,"
            " run_id, model_override, description, message_at, message_from,"
            " (SELECT count(*) FROM sessions c WHERE c.parent_session_id = sessions.id), plan,"
            " continued_from, continued_by, thoroughness, visitor_id")
_INSERT = "id, account_id, agent_id, title, status, created_at, updated_at, parent_session_id"
_ORDER = "ORDER BY updated_at DESC, id DESC"
TITLE_CHARS = 60  # automatic titles: the first line of the first message, trimmed to this


def create_session(conn: Conn, session_id: str, account_id: str, agent_id: str,
                   title: str | None, now: int, *, parent_session_id: str | None = None) -> dict:
    conn.execute(*session_insert(session_id, account_id, agent_id, title, now, parent_session_id))
    return new_session_info(session_id, account_id, agent_id, title, now, parent_session_id)


def session_insert(session_id: str, account_id: str, agent_id: str, title: str | None, now: int,
                   parent_session_id: str | None = None) -> tuple[str, tuple]:
    """`create_session`'s statement, for a job that sends it with others in one round trip."""
    return (f"INSERT INTO sessions ({_INSERT}) VALUES (?, ?, ?, ?, 'idle', ?, ?, ?)",
            (session_id, account_id, agent_id, title, now, now, parent_session_id))


def new_session_info(session_id: str, account_id: str, agent_id: str, title: str | None, now: int,
                     parent_session_id: str | None = None) -> dict:
    """The SessionInfo of a session `session_insert` just stored."""
    return session_info((session_id, account_id, agent_id, title, "idle", now, now, parent_session_id,
                         None, None, None, None, None, 0, None, None, None, None, None))


def get_session(conn: Conn, session_id: str) -> dict | None:
    row = conn.execute(SESSION_ROW, (session_id,)).fetchone()
    return None if row is None else session_info(row)


SESSION_ROW = f"SELECT {_COLUMNS} FROM sessions WHERE id = ?"


def list_sessions(conn: Conn, account_id: str, agent_id: str | None, limit: int,
                  cursor: dict | None, *, parent_session_id: str | None = None,
                  include_children: bool = True, visitors: str | None = "all") -> tuple[list[dict], dict | None]:
    """(sessions, next cursor or None) of the account, optionally of one agent, or the children
    of one session; `include_children=False` leaves out sessions that have a parent. `visitors`:
    "all" keeps visitor sessions (public chat; the owner's listing), None leaves them out (anyone
    else's), an account id keeps that visitor's alone (of `agent_id`, on sessions_by_visitor)."""
    where: list[str]
    params: list[object]
    if visitors not in ("all", None) and agent_id is not None:
        where, params = ["agent_id = ?", "visitor_id = ?"], [agent_id, visitors]
    elif parent_session_id is not None:
        where, params = ["parent_session_id = ?", "+account_id = ?"], [parent_session_id, account_id]
    elif agent_id is not None:
        # Unary + keeps the planner on sessions_by_agent (the narrower index) for this filter.
        where, params = ["agent_id = ?", "+account_id = ?"], [agent_id, account_id]
    else:
        where, params = ["account_id = ?"], [account_id]
    if parent_session_id is None and not include_children:
        where.append("parent_session_id IS NULL")
    if visitors is None:
        where.append("visitor_id IS NULL")
    if parent_session_id is not None and agent_id is not None:
        where.append("+agent_id = ?")
        params.append(agent_id)
    if cursor is not None:
        updated_before, id_before = _cursor(cursor)
        # "updated_at <= ?" bounds the index range; the OR skips rows already returned.
        where.append("updated_at <= ? AND (updated_at < ? OR id < ?)")
        params += [updated_before, updated_before, id_before]
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE {' AND '.join(where)} {_ORDER} LIMIT ?",
        (*params, limit + 1)).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = {"updatedBefore": rows[-1][6], "idBefore": rows[-1][0]} if more and rows else None
    return [session_info(row) for row in rows], next_cursor


def _cursor(cursor: dict) -> tuple[int, str]:
    """(updatedBefore, idBefore) of a cursor this store handed out; InvalidCursor otherwise."""
    updated_before, id_before = cursor.get("updatedBefore"), cursor.get("idBefore")
    if type(updated_before) is not int or type(id_before) is not str:
        raise InvalidCursor("cursor must be {updatedBefore: integer, idBefore: text} as nextCursor gave it")
    return updated_before, id_before


def sessions_of_agent(conn: Conn, agent_id: str, limit: int) -> list[dict]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE agent_id = ? {_ORDER} LIMIT ?",
                        (agent_id, limit)).fetchall()
    return [session_info(row) for row in rows]


def set_session_status(conn: Conn, session_id: str, status: str, now: int) -> dict:
    row = conn.execute(
        f"UPDATE sessions SET status = ?, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (status, now, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return session_info(row)


def update_session(conn: Conn, session_id: str, now: int, *, title: str | None = None,
                   set_override: bool = False, model_override: dict | None = None,
                   set_thoroughness: bool = False, thoroughness: str | None = None) -> dict:
    """UpdateSession: a title set here is the user's (title_source 'user'); with `set_override`,
    `model_override` replaces the override (None clears it); with `set_thoroughness`, the
    delegation preset (None clears it)."""
    sets: list[str] = ["updated_at = max(updated_at, ?)"]
    params: list[object] = [now]
    if set_thoroughness:
        sets.append("thoroughness = ?")
        params.append(thoroughness)
    if title is not None:
        sets += ["title = ?", "title_source = 'user'"]
        params.append(title)
    if set_override:
        sets.append("model_override = ?")
        params.append(None if model_override is None else codec.encode(model_override))
    row = conn.execute(
        f"UPDATE sessions SET {', '.join(sets)} WHERE id = ? RETURNING {_COLUMNS}",
        (*params, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return session_info(row)


def auto_title(conn: Conn, session_id: str, title: str, now: int) -> dict | None:
    """Give an untitled session an automatic title; never replaces a title (above all a user's).
    Returns the SessionInfo when it changed."""
    row = conn.execute(
        f"UPDATE sessions SET title = ?, updated_at = max(updated_at, ?)"
        f" WHERE id = ? AND title IS NULL AND title_source != 'user' RETURNING {_COLUMNS}",
        (title, now, session_id)).fetchone()
    return None if row is None else session_info(row)


def title_from_text(text: str) -> str:
    """The first non-blank line of a message, trimmed to TITLE_CHARS characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:TITLE_CHARS].rstrip()
    return ""


def delete_session(conn: Conn, session_id: str) -> None:
    """Remove the session and its events. Its runs keep their history with session_id NULL and
    no title, and
    its child sessions become top level (seed-agents-storage: deletion detaches, never cascades)."""
    # The title came from the session (its title, or its first message's first line): it goes
    # with the session, as the messages do.
    conn.execute("UPDATE runs SET session_id = NULL, title = '' WHERE session_id = ?", (session_id,))
    conn.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?", (session_id,))
    # Continuations: the links to it go; a successor's row (its starting point) goes with the
    # successor, while the row of a successor it had stays, as that one's history.
    conn.execute("UPDATE sessions SET continued_from = NULL WHERE continued_from = ?", (session_id,))
    conn.execute("UPDATE sessions SET continued_by = NULL WHERE continued_by = ?", (session_id,))
    conn.execute("DELETE FROM session_continuations WHERE successor_session_id = ?", (session_id,))
    conn.execute("DELETE FROM session_events WHERE session_id = ?", (session_id,))   # its chain and envelopes too
    files_q.delete_session_files(conn, session_id)
    conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


def ids_with_status(conn: Conn, status: str) -> list[str]:
    """Sessions in `status` (a start-up check; not a hot query)."""
    return [sid for (sid,) in conn.execute("SELECT id FROM sessions WHERE status = ?", (status,))]


def session_info(row: tuple) -> dict:
    (session_id, account_id, agent_id, title, status, created_at, updated_at, parent, run_id,
     override, description, message_at, message_from, children, plan, continued_from, continued_by,
     thoroughness, *rest) = row
    visitor = rest[0] if rest else None
    info = {"id": session_id, "account": account_id, "agentId": agent_id, "status": status,
            "createdAt": created_at, "updatedAt": updated_at}
    if title is not None:
        info["title"] = title
    if parent is not None:
        info["parentSessionId"] = parent
    if run_id is not None:
        info["runId"] = run_id
    if children:
        info["childSessionCount"] = children
    if override is not None:
        info["modelOverride"] = codec.decode(override)
    if description is not None:
        info["description"] = description
    if message_at is not None:   # the session's latest message (append_event writes it)
        info["activity"] = {"messageAt": message_at, "messageFrom": message_from}
    if plan is not None:
        info["plan"] = codec.decode(plan)
    if continued_from is not None:   # continue_session's links, both ways (store/continuations.py)
        info["continuedFromSessionId"] = continued_from
    if continued_by is not None:
        info["continuedBySessionId"] = continued_by
    if thoroughness is not None:   # the delegation preset (protocol/agent/thoroughness.py)
        info["thoroughness"] = thoroughness
    if visitor is not None:   # a visitor's session (public chat: store/visitors.py)
        info["visitorId"] = visitor
    return info


def thoroughness_of_tree(conn: Conn, run_id: str) -> str | None:
    """The thoroughness a run's turn runs under: its tree's root session's (a child's session
    carries none of its own)."""
    row = conn.execute("SELECT s.thoroughness FROM runs r JOIN runs root ON root.id = r.root_run_id"
                       " JOIN sessions s ON s.id = root.session_id WHERE r.id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def get_plan(conn: Conn, session_id: str) -> dict | None:
    row = conn.execute("SELECT plan FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None or row[0] is None else codec.decode(row[0])


def set_plan(conn: Conn, session_id: str, plan: dict, now: int) -> dict:
    """The plan verb: the session's checklist replaced; the SessionInfo after it."""
    row = conn.execute(
        f"UPDATE sessions SET plan = ?, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (codec.encode(plan), now, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return session_info(row)


def retire_settled_plan(conn: Conn, session_id: str, run_id: str, now: int) -> tuple[dict | None, dict | None]:
    """At a turn's start (the reference's #retireSettledSessionPlan): a checklist that settled under
    an earlier run is history, already frozen on that run, so the session's live plan is cleared
    and the new turn starts clean. The copy on its run is written first when missing, so clearing
    is never the write that loses it. (SessionInfo after, RunInfo written), or (None, None) when
    there was nothing to retire."""
    plan = get_plan(conn, session_id)
    owner_id = (plan or {}).get("ownerRunId")
    if not plans.is_settled(plan) or not owner_id or owner_id == run_id:
        return None, None
    owner = runs_q.get_run(conn, owner_id)
    written = None
    if owner is not None and owner.get("sessionId") == session_id and not owner.get("plan"):
        written = runs_q.set_plan(conn, owner_id, plan)
    row = conn.execute(
        f"UPDATE sessions SET plan = NULL, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (now, session_id)).fetchone()
    return (None if row is None else session_info(row)), written


def set_agent_status(conn: Conn, session_id: str, now: int, *, title: str | None,
                     description: str | None) -> dict:
    """The status verb: the agent's title (never over one the user typed; it becomes the
    agent's) and description; the SessionInfo after it."""
    sets: list[str] = ["updated_at = max(updated_at, ?)"]
    params: list[object] = [now]
    if title is not None:
        sets.append("title = CASE WHEN title_source = 'user' THEN title ELSE ? END")
        sets.append("title_source = CASE WHEN title_source = 'user' THEN 'user' ELSE 'agent' END")
        params.append(title)
    if description is not None:
        sets.append("description = ?")
        params.append(description)
    row = conn.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ? RETURNING {_COLUMNS}",
                       (*params, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    return session_info(row)


def apply_title(conn: Conn, session_id: str, title: str, description: str, now: int) -> dict | None:
    """The generated title, only over a provisional one; the description only into an empty slot."""
    row = conn.execute("UPDATE sessions SET title = ?, title_source = 'agent', updated_at = max(updated_at, ?)"
                       " WHERE id = ? AND title_source = 'system' RETURNING id", (title, now, session_id)).fetchone()
    if row is None:
        return None
    if description:
        conn.execute("UPDATE sessions SET description = ? WHERE id = ? AND (description IS NULL OR description = '')",
                     (description, session_id))
    return get_session(conn, session_id)


def title_source(conn: Conn, session_id: str) -> str | None:
    row = conn.execute("SELECT title_source FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else row[0]


def session_ids_of_agent(conn: Conn, agent_id: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM sessions WHERE agent_id = ?", (agent_id,))]


def child_session_ids(conn: Conn, session_id: str) -> list[str]:
    """The sessions whose parent is this one (delegated children, continuations' successors)."""
    return [r[0] for r in conn.execute("SELECT id FROM sessions WHERE parent_session_id = ?", (session_id,))]

"""Agents: AgentInfo = {id, account, definition, stateDir, status, createdAt, updatedAt,
accessRole, publicRead, busy, activity?} (CONTRACT section 4).

`accessRole` is the caller's role, so every function that returns an AgentInfo takes it (the
owner's, until agents are shared). `busy` is derived from the runs table on every read (a run
of the agent is queued or running), so it can never disagree with the runs. `activity` is the
rollup that `record_activity` writes with every appended session event.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..database.port import Conn, execute_later
from . import codec
from .errors import NotFound
from .runs import ACTIVE

# AgentInfo.busy repeats the WHERE of the partial index runs_active_by_agent (the live
# statuses, store/runs.ACTIVE) verbatim: SQLite uses a partial index only then.
_COLUMNS = ("id, account_id, definition, state_dir, status, created_at, updated_at, public_read,"
            " activity_at, activity_kind, activity_session_id, message_at, message_from,"
            f" EXISTS (SELECT 1 FROM runs WHERE runs.agent_id = agents.id AND {ACTIVE}), public_chat")
OWNER = "owner"


def create_agent(conn: Conn, agent_id: str, account_id: str, definition: dict,
                 state_dir: str, now: int, role: str = OWNER) -> dict:
    conn.execute(
        "INSERT INTO agents (id, account_id, definition, state_dir, status, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, 'idle', ?, ?)",
        (agent_id, account_id, codec.encode(definition), state_dir, now, now))
    return agent_info((agent_id, account_id, definition, state_dir, "idle", now, now, 0,
                       None, None, None, None, None, 0, None), role)


def get_agent(conn: Conn, agent_id: str, role: str = OWNER) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return None if row is None else agent_info(_seen(conn, row), role)


def agent_account(conn: Conn, agent_id: str) -> str | None:
    """The owning account of an agent (None when there is no such agent)."""
    row = conn.execute("SELECT account_id FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return None if row is None else row[0]


def list_agents(conn: Conn, account_id: str, role: str = OWNER) -> list[dict]:
    """The account's agents, most recently updated first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM agents WHERE account_id = ? ORDER BY updated_at DESC, id",
        (account_id,)).fetchall()
    return [agent_info(_seen(conn, row), role) for row in rows]


def definition_size(conn: Conn, agent_id: str) -> int:
    """Bytes of the agent's stored definition (0 when there is no such agent)."""
    row = conn.execute("SELECT length(definition) FROM agents WHERE id = ?", (agent_id,)).fetchone()
    return 0 if row is None or row[0] is None else row[0]


AGENT_INFO_OVERHEAD = 512   # bytes an AgentInfo adds to its definition, at most (ids, times, dirs)


def list_agents_page(conn: Conn, account_id: str, limit: int, cursor: dict | None,
                     max_bytes: int, role: str = OWNER) -> tuple[list[dict], dict | None]:
    """One page of `list_agents`: at most `limit` agents, and it also ends before the stored
    definitions (plus AGENT_INFO_OVERHEAD each) pass `max_bytes` (one agent at least). Returns
    (agents, next cursor or None); the cursor is {updatedBefore, idAfter} (order: updated_at
    DESC, id), keyset on the agents_by_account index."""
    where, params = "account_id = ?", [account_id]
    if cursor is not None:
        # "updated_at <= ?" bounds the index range; the OR skips rows already returned.
        where += " AND updated_at <= ? AND (updated_at < ? OR id > ?)"
        params += [cursor["updatedBefore"], cursor["updatedBefore"], cursor["idAfter"]]
    rows: list[tuple] = []
    size, more = 0, False
    for row in conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE {where} ORDER BY updated_at DESC, id LIMIT ?",
                            (*params, limit + 1)):
        cost = len(row[2]) + AGENT_INFO_OVERHEAD
        if len(rows) == limit or (rows and size + cost > max_bytes):
            more = True
            break
        rows.append(row)
        size += cost
    next_cursor = {"updatedBefore": rows[-1][6], "idAfter": rows[-1][0]} if more else None
    return [agent_info(_seen(conn, row), role) for row in rows], next_cursor


def set_agent_status(conn: Conn, agent_id: str, status: str, now: int,
                     role: str = OWNER, *, decoded: bool = True) -> dict:
    if getattr(conn, "end_writes", None) is not None:
        return _deferred_change(conn, agent_id, role, decoded, status=status, updated_at=now)
    row = conn.execute(
        f"UPDATE agents SET status = ?, updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (status, now, agent_id)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent_info(row, role, decoded=decoded)


def touch_agent(conn: Conn, agent_id: str, now: int, role: str = OWNER, *,
                decoded: bool = True) -> dict:
    """Mark the agent updated (a session of it changed); returns the AgentInfo to publish
    (`decoded=False`: its definition left as the stored bytes, see `agent_info`)."""
    if getattr(conn, "end_writes", None) is not None:
        return _deferred_change(conn, agent_id, role, decoded, updated_at=now)
    # max(): a clock step backwards must not reorder "newest update first" lists.
    row = conn.execute(
        f"UPDATE agents SET updated_at = max(updated_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (now, agent_id)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent_info(row, role, decoded=decoded)


def record_activity(conn: Conn, agent_id: str, session_id: str, kind: str,
                    message_from: str | None, now: int) -> None:
    """The activity rollup, in the transaction that appends the event: `at`/`kind` move with
    every event; the message columns and the session only with a message (`message_from` is
    'user' or 'assistant', else None). Times never move backwards, whatever the clock does."""
    end_writes = getattr(conn, "end_writes", None)
    if end_writes is not None:
        key = (_ROW, agent_id)
        pending, infos = end_writes.get(key) or (_NOTHING, ())
        end_writes.put(key, (pending.with_activity(session_id, kind, message_from, now), infos), _flush_agent)
        return
    conn.execute(
        "UPDATE agents SET activity_at = max(coalesce(activity_at, 0), ?1), activity_kind = ?2,"
        " activity_session_id = CASE WHEN CAST(?3 AS TEXT) IS NULL THEN activity_session_id ELSE ?4 END,"
        " message_at = CASE WHEN CAST(?3 AS TEXT) IS NULL THEN message_at ELSE max(coalesce(message_at, 0), ?1) END,"
        " message_from = coalesce(?3, message_from)"
        " WHERE id = ?5",
        (now, kind, message_from, session_id, agent_id))


# -- an agent's row written once per transaction (server/database/end_writes.py) ----------------
# On a connection with `end_writes` (PostgreSQL's group-committing writer) the status, the touch
# and the activity rollup above are folded in memory and written once, at the end of the batch,
# with the agents' rows taken in id order (docs/storage.md, "Group commit on PostgreSQL"). What
# each call returns is what it returned when it wrote at once: at the flush, with the row locked,
# every AgentInfo handed out is filled again from the row as it stands plus the changes folded up
# to its own call, so its values are those of the batch's jobs run one after the other, after
# whatever other servers committed first.
_ROW = "agents"


@dataclass(frozen=True, slots=True)
class _Pending:
    """The changes folded so far: each as its own statement would leave the row."""
    status: str | None = None
    updated_at: int | None = None      # max of the touches' times
    at: int | None = None              # max of the events' times
    kind: str | None = None            # the last event's
    session_id: str | None = None      # the last message's
    message_at: int | None = None      # max of the messages' times
    message_from: str | None = None    # the last message's

    def with_activity(self, session_id: str, kind: str, message_from: str | None, now: int) -> "_Pending":
        at = now if self.at is None else max(self.at, now)
        if message_from is None:
            return replace(self, at=at, kind=kind)
        message_at = now if self.message_at is None else max(self.message_at, now)
        return replace(self, at=at, kind=kind, session_id=session_id, message_at=message_at,
                       message_from=message_from)

    def with_change(self, status: str | None, updated_at: int) -> "_Pending":
        touched = updated_at if self.updated_at is None else max(self.updated_at, updated_at)
        return replace(self, status=status or self.status, updated_at=touched)

    def applied(self, row: tuple) -> tuple:
        """`row` (of _COLUMNS) as these changes leave it."""
        out = list(row)
        if self.status is not None:
            out[4] = self.status
        if self.updated_at is not None:
            out[6] = max(out[6], self.updated_at)
        if self.at is not None:
            out[8] = max(out[8] or 0, self.at)
            out[9] = self.kind
        if self.message_from is not None:
            out[10] = self.session_id
            out[11] = max(out[11] or 0, self.message_at)
            out[12] = self.message_from
        return tuple(out)


_NOTHING = _Pending()


def _seen(conn: Conn, row: tuple) -> tuple:
    """A row read in a write job, with what this transaction has folded for it so far."""
    end_writes = getattr(conn, "end_writes", None)
    if not end_writes:
        return row
    entry = end_writes.get((_ROW, row[0]))
    return row if entry is None else entry[0].applied(row)


def touch_read_agent(conn: Conn, row: tuple | None, agent_id: str, now: int, role: str = OWNER, *,
                     decoded: bool = True) -> dict:
    """`touch_agent`, the agent's row (AGENT_ROW) read already in this job's transaction (sent
    with the job's other reads in one round trip: CreateSession's on PostgreSQL)."""
    if getattr(conn, "end_writes", None) is None:
        return touch_agent(conn, agent_id, now, role, decoded=decoded)
    return _deferred_change(conn, agent_id, role, decoded, updated_at=now, row=row)


def flags_of(row: tuple) -> tuple[str, bool, bool]:
    """(owning account, public read, public chat) from an AGENT_ROW row (owners.agent_flags)."""
    return row[1], bool(row[7]), row[14] is not None


AGENT_ROW = f"SELECT {_COLUMNS} FROM agents WHERE id = ?"


def _deferred_change(conn: Conn, agent_id: str, role: str, decoded: bool, *,
                     status: str | None = None, updated_at: int, row: Any = False) -> dict:
    # Read, not locked: the lock is the flush's. The row as this job sees it, for the NotFound
    # and the `busy` of its moment; the rest is filled again at the flush.
    if row is False:   # (not read yet)
        row = conn.execute(AGENT_ROW, (agent_id,)).fetchone()
    if row is None:
        raise NotFound(f"agent {agent_id} not found")
    end_writes = conn.end_writes
    assert end_writes is not None
    key = (_ROW, agent_id)
    pending, infos = end_writes.get(key) or (_NOTHING, ())
    pending = pending.with_change(status, updated_at)
    info = agent_info(pending.applied(row), role, decoded=decoded)
    end_writes.put(key, (pending, (*infos, (info, role, decoded, pending, row[13]))), _flush_agent)
    return info


def _flush_agent(conn: Conn, key: tuple, state: tuple) -> None:
    pending, infos = state
    # The lock an UPDATE takes, not FOR UPDATE: that one would also wait for every transaction
    # that inserted a session or run of the agent (their foreign keys' KEY SHARE locks).
    row = conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE id = ?{conn.traits.lock_to_update}",
                       (key[1],)).fetchone()
    if row is None:
        return   # deleted meanwhile: nothing to write; what was handed out stands
    new = pending.applied(row)
    execute_later(conn, "UPDATE agents SET status = ?, updated_at = ?, activity_at = ?, activity_kind = ?,"
                  " activity_session_id = ?, message_at = ?, message_from = ? WHERE id = ?",
                  (*new[4:5], new[6], *new[8:13], key[1]))
    for info, role, decoded, upto, busy in infos:
        seen = upto.applied(row)
        fresh = agent_info((*seen[:13], busy, *seen[14:]), role, decoded=decoded)
        info.clear()
        info.update(fresh)


def settle_running_agents(conn: Conn, now: int) -> int:
    """At start no run executes yet: an agent left 'running' by a dead process is 'idle'."""
    conn.execute("UPDATE agents SET status = 'idle', updated_at = max(updated_at, ?) WHERE status = 'running'",
                 (now,))
    return conn.changes()


def as_seen_by(info: dict, role: str) -> dict:
    """An owner's AgentInfo as a collaborator (`role`) sees it: its accessRole, and no stateDir."""
    if role == OWNER:
        return info
    return {**info, "accessRole": role, "stateDir": ""}


def agent_info(row: tuple, role: str = OWNER, *, decoded: bool = True) -> dict:
    """AgentInfo from a row of _COLUMNS; `role` is the caller's accessRole. `decoded=False`
    leaves the definition as its stored bytes: the writer thread, which every account's writes
    wait on, never decodes one per message (the app decodes it once per version to publish,
    Broadcaster.agent_decoded)."""
    (agent_id, account_id, definition, state_dir, status, created_at, updated_at, public_read,
     activity_at, activity_kind, activity_session_id, message_at, message_from, busy, *rest) = row
    public_chat = rest[0] if rest else None
    if decoded and type(definition) is not dict:
        definition = codec.decode(definition)
    elif not decoded and type(definition) is not dict:
        definition = bytes(definition)
    if role != OWNER:
        state_dir = ""   # a path on the server's disk: its owner's business only
    info = {"id": agent_id, "account": account_id, "definition": definition, "stateDir": state_dir,
            "status": status, "createdAt": created_at, "updatedAt": updated_at,
            "accessRole": role, "publicRead": bool(public_read), "busy": bool(busy)}
    if public_chat is not None:   # open to every signed account (store/visitors.py): its limits and grants
        info["publicChat"] = public_chat if type(public_chat) is dict else codec.decode(public_chat)
    if activity_at is not None:
        activity: dict = {"at": activity_at, "kind": activity_kind or "event"}
        if activity_session_id is not None:
            activity["sessionId"] = activity_session_id
        if message_at is not None:
            activity["messageAt"] = message_at
        if message_from is not None:
            activity["messageFrom"] = message_from
        info["activity"] = activity
    return info

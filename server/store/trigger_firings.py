"""Trigger firings, activity claims and activity watermarks.

TriggerFiringInfo = {id, triggerId, activityKey, status (created | skipped | error), createdAt,
sessionId?, runId?, runStatus?, scheduledAt?, activity?, error?}. A firing's key is unique per
(account, trigger): `insert_firing` returns None when the key was already taken, by this server
before a restart or by another server on the same database.
"""
from __future__ import annotations

from ..database.port import Conn
from . import codec

COLUMNS = ("id, trigger_id, activity_key, status, created_at, session_id, run_id, run_status,"
           " scheduled_at, activity_cbor, error, body_digest, chain_depth")


def firing_info(row: tuple) -> dict:
    (firing_id, trigger_id, key, status, created_at, session_id, run_id, run_status, scheduled_at,
     activity, error, digest, depth) = row
    info = {"id": firing_id, "triggerId": trigger_id, "activityKey": key, "status": status,
            "createdAt": created_at, "_digest": None if digest is None else bytes(digest),
            "_chainDepth": depth}
    for name, value in (("sessionId", session_id), ("runId", run_id), ("runStatus", run_status),
                        ("scheduledAt", scheduled_at), ("error", error)):
        if value is not None:
            info[name] = value
    if activity is not None:
        info["activity"] = codec.decode(activity)
    return info


def public(firing: dict) -> dict:
    return {k: v for k, v in firing.items() if not k.startswith("_")}


def firing_by_key(conn: Conn, account_id: str, trigger_id: str, key: str) -> dict | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM trigger_firings WHERE account_id = ? AND trigger_id = ?"
                       " AND activity_key = ?", (account_id, trigger_id, key)).fetchone()
    return None if row is None else firing_info(row)


def insert_firing(conn: Conn, firing_id: str, trigger: dict, key: str, status: str, now: int, *,
                  session_id: str | None = None, run_id: str | None = None, scheduled_at: int | None = None,
                  activity: dict | None = None, context: dict | None = None, body_digest: bytes | None = None,
                  error: str | None = None, chain_depth: int = 0) -> dict | None:
    """The firing, or None when (account, trigger, key) fired already (nothing is written)."""
    row = conn.execute(
        "INSERT INTO trigger_firings (id, account_id, agent_id, trigger_id, activity_key, status, session_id,"
        " run_id, scheduled_at, activity_cbor, context_cbor, body_digest, error, chain_depth, created_at, summary)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        f" ON CONFLICT (account_id, trigger_id, activity_key) DO NOTHING RETURNING {COLUMNS}",
        (firing_id, trigger["account"], trigger["agentId"], trigger["id"], key, status, session_id, run_id,
         scheduled_at, None if activity is None else codec.encode(activity),
         None if context is None else codec.encode(context), body_digest, error, chain_depth, now,
         None if activity is None else activity.get("summary"))).fetchone()
    return None if row is None else firing_info(row)


def firings_of_trigger(conn: Conn, trigger_id: str, limit: int) -> list[dict]:
    """Newest first."""
    rows = conn.execute(f"SELECT {COLUMNS} FROM trigger_firings WHERE trigger_id = ?"
                        " ORDER BY created_at DESC, coalesce(scheduled_at, 0) DESC, id DESC LIMIT ?", (trigger_id, limit)).fetchall()
    return [firing_info(row) for row in rows]


def fired_since(conn: Conn, agent_id: str, since: int) -> int:
    """Firings of the agent's triggers that started work since `since` (the hourly bound)."""
    return conn.execute("SELECT count(*) FROM trigger_firings WHERE agent_id = ? AND created_at >= ?"
                        " AND status = 'created'", (agent_id, since)).fetchone()[0]


def account_fired_since(conn: Conn, account_id: str, since: int) -> int:
    """Firings of all the account's agents' triggers that started work since `since` (the
    account's hourly bound; read through each agent's index, as `fired_since`)."""
    return conn.execute("SELECT count(*) FROM trigger_firings WHERE agent_id IN"
                        " (SELECT id FROM agents WHERE account_id = ?) AND created_at >= ?"
                        " AND status = 'created'", (account_id, since)).fetchone()[0]


def prune(conn: Conn, trigger_id: str, keep: int) -> None:
    """Drop the trigger's firings past the newest `keep` (one statement)."""
    conn.execute("DELETE FROM trigger_firings WHERE id IN (SELECT id FROM trigger_firings WHERE trigger_id = ?"
                 " ORDER BY created_at DESC, coalesce(scheduled_at, 0) DESC, id DESC LIMIT -1 OFFSET ?)",
                 (trigger_id, keep))


def firing_of_run(conn: Conn, run_id: str) -> tuple[str, str, int] | None:
    """(firing id, trigger id, chain depth) of the firing that started this run."""
    row = conn.execute("SELECT id, trigger_id, chain_depth FROM trigger_firings WHERE run_id = ?",
                       (run_id,)).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def set_run_status(conn: Conn, firing_id: str, status: str) -> None:
    conn.execute("UPDATE trigger_firings SET run_status = ? WHERE id = ?", (status, firing_id))


def sessions_of_trigger(conn: Conn, trigger_id: str, limit: int) -> list[tuple[str, dict]]:
    """(session id, firing) of the sessions the trigger started, newest first."""
    rows = conn.execute(f"SELECT {COLUMNS} FROM trigger_firings WHERE trigger_id = ? AND session_id IS NOT NULL"
                        " ORDER BY created_at DESC, coalesce(scheduled_at, 0) DESC, id DESC LIMIT ?", (trigger_id, limit)).fetchall()
    return [(row[5], firing_info(row)) for row in rows]


# -- activity admission ------------------------------------------------------------------------
def claim_event(conn: Conn, account_id: str, trigger_id: str, key: str, now: int) -> bool:
    """True for the first claim of (account, trigger, key); False when it was claimed before."""
    row = conn.execute("INSERT INTO trigger_event_claims (account_id, trigger_id, activity_key, created_at)"
                       " VALUES (?, ?, ?, ?) ON CONFLICT (account_id, trigger_id, activity_key) DO NOTHING"
                       " RETURNING 1", (account_id, trigger_id, key, now)).fetchone()
    return row is not None


# -- activity watermarks -----------------------------------------------------------------------
def watermark(conn: Conn, account_id: str, server_url: str) -> dict | None:
    """{seenKeys, lastSuccessAt, lastError?} or None before the account's first successful poll."""
    row = conn.execute("SELECT cursor_cbor, last_success_at, last_error FROM activity_watermarks"
                       " WHERE account_id = ? AND server_url = ?", (account_id, server_url)).fetchone()
    if row is None or row[1] is None:
        return None
    cursor = codec.decode(row[0])
    out = {"seenKeys": [k for k in cursor.get("seenKeys", []) if isinstance(k, str)]}
    if row[1] is not None:
        out["lastSuccessAt"] = row[1]
    if row[2] is not None:
        out["lastError"] = row[2]
    return out


def set_watermark(conn: Conn, account_id: str, server_url: str, seen_keys: list[str],
                  polled_at: int, success_at: int) -> None:
    conn.execute(
        "INSERT INTO activity_watermarks (account_id, server_url, cursor_cbor, last_poll_at, last_success_at,"
        " last_error) VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT (account_id, server_url) DO UPDATE SET"
        " cursor_cbor = excluded.cursor_cbor, last_poll_at = excluded.last_poll_at,"
        " last_success_at = excluded.last_success_at, last_error = NULL",
        (account_id, server_url, codec.encode({"seenKeys": seen_keys}), polled_at, success_at))


def watermark_error(conn: Conn, account_id: str, server_url: str, polled_at: int, error: str) -> None:
    conn.execute(
        "INSERT INTO activity_watermarks (account_id, server_url, cursor_cbor, last_poll_at, last_error)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, server_url) DO UPDATE SET"
        " last_poll_at = excluded.last_poll_at, last_error = excluded.last_error",
        (account_id, server_url, codec.encode({"seenKeys": []}), polled_at, error))


def take_poll_lease(conn: Conn, account_id: str, server_url: str, owner: str, now: int,
                    lease_ms: int) -> bool:
    """Shared store: may `owner` poll the account's feed now? The lease of the run queue
    (server/store/leases.py): one holder at a time, taken over once it has run out."""
    conn.execute(
        "INSERT INTO activity_watermarks (account_id, server_url, cursor_cbor) VALUES (?, ?, ?)"
        " ON CONFLICT (account_id, server_url) DO NOTHING",
        (account_id, server_url, codec.encode({"seenKeys": []})))
    row = conn.execute(
        "UPDATE activity_watermarks SET lease_owner = ?, lease_expires_at = ?"
        " WHERE account_id = ? AND server_url = ?"
        " AND (lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < ?) RETURNING 1",
        (owner, now + lease_ms, account_id, server_url, owner, now)).fetchone()
    return row is not None


def trigger_context(conn: Conn, session_id: str) -> dict | None:
    """AgentSessionTriggerContext of a session a firing started (GetSession `triggerContext`):
    the trigger as it was at admission (its name, prompt and source), the event, the firing's
    status. None for any other session (one indexed read)."""
    return context_of(conn.execute(CONTEXT_ROW, (session_id,)).fetchone())


CONTEXT_ROW = ("SELECT id, trigger_id, activity_key, status, error, created_at, activity_cbor, context_cbor"
               " FROM trigger_firings WHERE session_id = ?")


def context_of(row: tuple | None) -> dict | None:
    """`trigger_context` of the row CONTEXT_ROW found."""
    if row is None:
        return None
    firing_id, trigger_id, key, status, error, created_at, activity, context = row
    activity = codec.decode(activity) if activity is not None else {}
    context = codec.decode(context) if context is not None else {}
    prompt = context.get("prompt", "")
    out = {"triggerId": trigger_id, "triggerName": context.get("name", ""), "firingId": firing_id,
           "activityKey": key, "activitySummary": str(activity.get("summary", "")),
           "source": context.get("source", {}), "firedAt": created_at,
           "prompt": prompt if isinstance(prompt, str) else "", "activity": activity, "status": status}
    if not isinstance(prompt, str):
        out["promptBlocks"] = prompt
    if error is not None:
        out["error"] = error
    return out


def attribute_sessions(conn: Conn, sessions: list[dict]) -> None:
    """Set `startedByTrigger` (AgentSessionTriggerSummary) on the sessions a trigger started: one
    indexed read per 500 sessions, reading only small columns (never an event or a prompt)."""
    ids = [s["id"] for s in sessions]
    found: dict[str, dict] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = conn.execute(
            "SELECT f.session_id, f.id, f.trigger_id, f.activity_key, f.summary, f.created_at, t.name, t.source_cbor"
            " FROM trigger_firings f JOIN agent_triggers t ON t.id = f.trigger_id"
            f" WHERE f.session_id IN ({', '.join('?' * len(chunk))})", chunk).fetchall()
        for session_id, firing_id, trigger_id, key, summary, created_at, name, source in rows:
            found[session_id] = {"triggerId": trigger_id, "triggerName": name, "firingId": firing_id,
                                 "activityKey": key, "activitySummary": summary or key,
                                 "source": codec.decode(source), "firedAt": created_at}
    for session in sessions:
        if session["id"] in found:
            session["startedByTrigger"] = found[session["id"]]


def mark_error(conn: Conn, firing_id: str, error: str) -> None:
    """A firing whose continuation failed: no session or run came of it."""
    conn.execute("UPDATE trigger_firings SET status = 'error', error = ?, session_id = NULL, run_id = NULL"
                 " WHERE id = ?", (error, firing_id))

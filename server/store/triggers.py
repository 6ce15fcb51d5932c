"""Agent triggers: the rows of `agent_triggers` and their webhook credentials.

AgentTriggerInfo = {id, account, agentId, name, enabled, source, prompt, continuation?,
createdAt, updatedAt, lastCheckedAt?, lastFiredAt?, lastError?} (the reference's shape). The
store also keeps what the scheduler and the backoff need (`next_due_at`, `failures`,
`backoff_until`), returned under keys clients never see (`_nextDueAt`, ...; `public` drops them).
"""
from __future__ import annotations

from ..database.port import Conn
from . import codec

COLUMNS = ("id, account_id, agent_id, name, enabled, source_cbor, prompt_cbor, continuation_cbor,"
           " created_at, updated_at, last_checked_at, last_fired_at, last_error, next_due_at,"
           " failures, backoff_until, merged_into")


def trigger_info(row: tuple) -> dict:
    (trigger_id, account_id, agent_id, name, enabled, source, prompt, continuation, created_at,
     updated_at, last_checked_at, last_fired_at, last_error, next_due_at, failures, backoff_until,
     merged_into) = row
    info = {"id": trigger_id, "account": account_id, "agentId": agent_id, "name": name,
            "enabled": bool(enabled), "source": codec.decode(source), "prompt": codec.decode(prompt),
            "createdAt": created_at, "updatedAt": updated_at,
            "_nextDueAt": next_due_at, "_failures": failures, "_backoffUntil": backoff_until}
    if continuation is not None:
        info["continuation"] = codec.decode(continuation)
    if last_checked_at is not None:
        info["lastCheckedAt"] = last_checked_at
    if last_fired_at is not None:
        info["lastFiredAt"] = last_fired_at
    if last_error is not None:
        info["lastError"] = last_error
    if merged_into is not None:
        info["mergedInto"] = merged_into
    return info


def public(trigger: dict) -> dict:
    """The AgentTriggerInfo a client sees, and for an enabled schedule its `nextFireAt` (ms, the
    slot the scheduler waits for; an extension of the reference's shape, so a person can see when
    it will fire)."""
    info = {k: v for k, v in trigger.items() if not k.startswith("_")}
    if trigger.get("enabled") and trigger.get("_nextDueAt") is not None and \
            (trigger.get("source") or {}).get("type") == "schedule":
        info["nextFireAt"] = trigger["_nextDueAt"]
    return info


def create_trigger(conn: Conn, trigger_id: str, account_id: str, agent_id: str, name: str,
                   enabled: bool, source: dict, prompt: object, continuation: dict | None, now: int,
                   next_due_at: int | None) -> dict:
    row = conn.execute(
        f"INSERT INTO agent_triggers (id, account_id, agent_id, name, enabled, source_type, source_cbor,"
        f" prompt_cbor, continuation_cbor, created_at, updated_at, next_due_at)"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
        (trigger_id, account_id, agent_id, name, int(enabled), source["type"], codec.encode(source),
         codec.encode(prompt), None if continuation is None else codec.encode(continuation), now, now,
         next_due_at)).fetchone()
    return trigger_info(row)


def get_trigger(conn: Conn, trigger_id: str) -> dict | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM agent_triggers WHERE id = ?", (trigger_id,)).fetchone()
    return None if row is None else trigger_info(row)


def trigger_named(conn: Conn, agent_id: str, name: str) -> dict | None:
    """The agent's trigger of that name (names are unique per agent), or None."""
    row = conn.execute("SELECT id FROM agent_triggers WHERE agent_id = ? AND name = ?", (agent_id, name)).fetchone()
    return None if row is None else get_trigger(conn, row[0])


def trigger_access(conn: Conn, trigger_id: str) -> tuple[str, str] | None:
    """(owning account, agent id) of a trigger, read before the row (as store/owners.py does)."""
    row = conn.execute("SELECT account_id, agent_id FROM agent_triggers WHERE id = ?", (trigger_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def name_taken(conn: Conn, agent_id: str, name: str, but: str | None = None) -> bool:
    row = conn.execute("SELECT id FROM agent_triggers WHERE agent_id = ? AND name = ?", (agent_id, name)).fetchone()
    return row is not None and row[0] != but


def triggers_of_agent(conn: Conn, agent_id: str, limit: int) -> list[dict]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM agent_triggers WHERE agent_id = ? ORDER BY created_at, id LIMIT ?",
                        (agent_id, limit)).fetchall()
    return [trigger_info(row) for row in rows]


def count_of_agent(conn: Conn, agent_id: str) -> int:
    return conn.execute("SELECT count(*) FROM agent_triggers WHERE agent_id = ?", (agent_id,)).fetchone()[0]


def update_trigger(conn: Conn, trigger_id: str, now: int, *, name: str | None = None,
                   enabled: bool | None = None, source: dict | None = None, prompt: object = None,
                   continuation: dict | None = None, next_due_at: int | None = None,
                   retime: bool = False) -> dict | None:
    """Apply a patch; with `retime`, `next_due_at` replaces the scheduled slot (None clears it).
    Re-enabling or changing a trigger forgets its backoff."""
    sets: list[str] = ["updated_at = max(updated_at, ?)", "failures = 0", "backoff_until = NULL"]
    params: list[object] = [now]
    if name is not None:
        sets.append("name = ?")
        params.append(name)
    if enabled is not None:
        sets.append("enabled = ?")
        params.append(int(enabled))
    if source is not None:
        sets += ["source_type = ?", "source_cbor = ?"]
        params += [source["type"], codec.encode(source)]
    if prompt is not None:
        sets.append("prompt_cbor = ?")
        params.append(codec.encode(prompt))
    if continuation is not None:
        sets.append("continuation_cbor = ?")
        params.append(codec.encode(continuation))
    if retime:
        sets.append("next_due_at = ?")
        params.append(next_due_at)
    if enabled or source is not None:
        sets.append("last_error = NULL")
    row = conn.execute(f"UPDATE agent_triggers SET {', '.join(sets)} WHERE id = ? RETURNING {COLUMNS}",
                       (*params, trigger_id)).fetchone()
    return None if row is None else trigger_info(row)


def retire_into(conn: Conn, trigger_id: str, survivor_id: str, now: int) -> dict | None:
    """A trigger combined into `survivor_id`: disabled and marked, its firings kept, and its
    activity claims imported into the survivor (the union: what either admitted, the survivor
    never admits again); deleting it later leaves the imported claims."""
    conn.execute("INSERT INTO trigger_event_claims (account_id, trigger_id, activity_key, created_at)"
                 " SELECT account_id, ?, activity_key, created_at FROM trigger_event_claims WHERE trigger_id = ?"
                 " ON CONFLICT DO NOTHING", (survivor_id, trigger_id))
    row = conn.execute(f"UPDATE agent_triggers SET enabled = 0, merged_into = ?, next_due_at = NULL,"
                       f" updated_at = max(updated_at, ?) WHERE id = ? RETURNING {COLUMNS}",
                       (survivor_id, now, trigger_id)).fetchone()
    return None if row is None else trigger_info(row)


def delete_trigger(conn: Conn, trigger_id: str) -> None:
    """The trigger, its credentials, firings and claims. Sessions it started stay (their
    attribution goes with the firings, as in the reference)."""
    for table in ("trigger_firings", "trigger_event_claims"):
        conn.execute(f"DELETE FROM {table} WHERE trigger_id = ?", (trigger_id,))
    conn.execute("DELETE FROM webhook_trigger_credentials WHERE trigger_id = ?", (trigger_id,))
    conn.execute("DELETE FROM agent_triggers WHERE id = ?", (trigger_id,))


def delete_agent_triggers(conn: Conn, agent_id: str) -> None:
    """Everything of the agent's triggers (DeleteAgent's transaction)."""
    for (trigger_id,) in conn.execute("SELECT id FROM agent_triggers WHERE agent_id = ?", (agent_id,)).fetchall():
        delete_trigger(conn, trigger_id)


# -- the scheduler's and monitors' reads ------------------------------------------------------
def earliest_due(conn: Conn) -> int | None:
    """The first slot any enabled schedule waits for (the scheduler sleeps until it)."""
    row = conn.execute("SELECT min(next_due_at) FROM agent_triggers"
                       " WHERE enabled = 1 AND next_due_at IS NOT NULL").fetchone()
    return None if row is None else row[0]


def due_triggers(conn: Conn, now: int, limit: int) -> list[dict]:
    """Enabled schedules whose slot has come, earliest first; on PostgreSQL their rows are locked
    for this transaction and rows another server's transaction holds are skipped, so each slot is
    taken by one server (the run queue's claim: server/store/leases.py)."""
    lock = conn.traits.skip_locked
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM agent_triggers WHERE enabled = 1 AND next_due_at IS NOT NULL"
        f" AND next_due_at <= ? ORDER BY next_due_at LIMIT ?{lock}", (now, limit)).fetchall()
    return [trigger_info(row) for row in rows]


def set_next_due(conn: Conn, trigger_id: str, next_due_at: int | None, checked_at: int) -> None:
    conn.execute("UPDATE agent_triggers SET next_due_at = ?, last_checked_at = ? WHERE id = ?",
                 (next_due_at, checked_at, trigger_id))


def enabled_of_type(conn: Conn, source_types: tuple[str, ...], account_id: str | None = None) -> list[dict]:
    marks = ", ".join("?" * len(source_types))
    where, params = f"enabled = 1 AND source_type IN ({marks})", list(source_types)
    if account_id is not None:
        where += " AND account_id = ?"
        params.append(account_id)
    rows = conn.execute(f"SELECT {COLUMNS} FROM agent_triggers WHERE {where} ORDER BY created_at, id",
                        params).fetchall()
    return [trigger_info(row) for row in rows]


KEEP = object()   # record_outcome's next_due: the next slot stays as it is


def record_outcome(conn: Conn, trigger_id: str, now: int, *, fired: bool, error: str | None,
                   backoff_ms: int | None = None, next_due: object = KEEP) -> None:
    """After a firing: `fired` stamps lastFiredAt; an error counts a failure (and backs off for
    `backoff_ms`); `next_due` (an int, or None for no slot left) moves the schedule's next slot in
    the same statement."""
    sets: list[str] = ["last_checked_at = ?"]
    params: list[object] = [now]
    if next_due is not KEEP:
        sets.append("next_due_at = ?")
        params.append(next_due)
    if error is None:
        if fired:
            sets.append("last_fired_at = ?")
            params.append(now)
    else:
        sets += ["failures = failures + 1", "last_error = ?", "backoff_until = ?"]
        params += [error, None if backoff_ms is None else now + backoff_ms]
    conn.execute(f"UPDATE agent_triggers SET {', '.join(sets)} WHERE id = ?", (*params, trigger_id))


def clear_failures(conn: Conn, trigger_id: str) -> None:
    conn.execute("UPDATE agent_triggers SET failures = 0, backoff_until = NULL, last_error = NULL"
                 " WHERE id = ? AND failures > 0", (trigger_id,))


def failures_of(conn: Conn, trigger_id: str) -> int:
    row = conn.execute("SELECT failures FROM agent_triggers WHERE id = ?", (trigger_id,)).fetchone()
    return 0 if row is None else row[0]


# -- webhook credentials -----------------------------------------------------------------------
def set_credentials(conn: Conn, trigger_id: str, account_id: str, secret_hash: bytes,
                    ciphertext: bytes, now: int) -> None:
    conn.execute(
        "INSERT INTO webhook_trigger_credentials (trigger_id, account_id, secret_hash, secret_ciphertext,"
        " created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (trigger_id) DO NOTHING",
        (trigger_id, account_id, bytes(secret_hash), bytes(ciphertext), now))


def credentials(conn: Conn, trigger_id: str) -> tuple[bytes, bytes] | None:
    """(secret hash, sealed secret) of a webhook trigger."""
    row = conn.execute("SELECT secret_hash, secret_ciphertext FROM webhook_trigger_credentials"
                       " WHERE trigger_id = ?", (trigger_id,)).fetchone()
    return None if row is None else (bytes(row[0]), bytes(row[1]))


def hook_target(conn: Conn, trigger_id: str) -> tuple[dict, bytes] | None:
    """An enabled webhook trigger and its secret hash, in one read (the delivery's check)."""
    row = conn.execute(
        f"SELECT {', '.join('t.' + c.strip() for c in COLUMNS.split(','))}, w.secret_hash"
        " FROM agent_triggers t JOIN webhook_trigger_credentials w ON w.trigger_id = t.id"
        " WHERE t.id = ? AND t.enabled = 1 AND t.source_type = 'webhook'", (trigger_id,)).fetchone()
    return None if row is None else (trigger_info(row[:-1]), bytes(row[-1]))

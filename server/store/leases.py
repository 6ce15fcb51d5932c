"""Run leases: how several servers on one PostgreSQL store share the run queue.

PostgreSQL only (`db.shared`): the SQLite schema has no lease columns, and one process owns a
SQLite file. The functions run through the same `db.write` façade as the rest of `seed_agents.server.store`
(PostgreSQL syntax that `seed_agents.server.database.postgres.dialect` leaves alone, `?` placeholders).

A claimed or running run carries `lease_owner` (a server's per-process id) and
`lease_expires_at` (milliseconds); no other status carries one (the schema's
`runs_lease_check`; docs/storage.md "Which run statuses hold a lease"). Expiries are stamped and
compared on the **database's clock** (`_DB_NOW`), so servers whose clocks differ still agree on
when a lease ran out. The run's own times (updatedAt, startedAt) keep the server's clock, as
every other write does.

- `claim`: the oldest claimable queued runs move to running under this server's lease, in the
  claim's transaction (`FOR UPDATE SKIP LOCKED`: claimers on other servers skip the rows this one
  holds instead of waiting). Claimable: the run's session has no older queued run and no live
  (claimed, running, waiting) one, so a session's runs pass one at a time, in order; the unique
  index `runs_one_live_per_session` refuses a second one even if two claimers raced (the writer
  then runs the job again, and it sees the winner).
- `renew`: pushes the expiry of the runs this server still holds; returns which those are.
- `requeue_expired`: runs whose lease ran out (their server died or stalled) go back to the queue
  through `runs.move_run`, which clears the lease (`runs.save_run`).
- `holds`: inside a finishing transaction, locks the run's row and says whether this server still
  holds it, so a run is answered once: by the server holding it when the answer commits.
"""
from __future__ import annotations

from . import runs as runs_q

# Now, in milliseconds, on the database's clock (at the statement's execution).
_DB_NOW = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"

# The oldest claimable queued runs (see the module doc), locked for this transaction. A batch
# holds at most one run per session: any later queued run of a session has an older queued one.
# Entering 'running' stamps what runs.transition stamps: an attempt counted, startedAt the first
# time, the error cleared, updatedAt never backwards.
#
# Found without walking a deep queue (docs/performance.md, "Taking the next queued run"): the
# claimable runs are the heads (oldest queued run) of sessions with no live run. The first
# _EARLY queued runs in queue order are a prefix of it, so a session's head among them is known
# from them alone; when they hold `limit` claimable heads, those are the oldest (any head after
# them is younger), and their live checks stop at the `limit`-th. Only when they do not (a deep queue on a busy session fills them) are the
# sessions with queued runs visited, one index descent each (runs_queued_by_session), never
# their queued runs. Each live check is one lookup in runs_one_live_per_session.
_EARLY = 64
_CLAIM = f"""
WITH RECURSIVE early AS MATERIALIZED (
    SELECT r.id, r.session_id, r.created_at, r.pos FROM runs r
    WHERE r.status = 'queued' AND r.session_id IS NOT NULL
    ORDER BY r.created_at, r.pos LIMIT {_EARLY}),
early_heads AS MATERIALIZED (
    SELECT h.id FROM (
        SELECT e.id, e.session_id FROM (
            SELECT id, session_id, created_at, pos,
                   row_number() OVER (PARTITION BY session_id ORDER BY created_at, pos) AS nth
            FROM early) e
        WHERE e.nth = 1 ORDER BY e.created_at, e.pos) h
    WHERE (SELECT 1 FROM runs o WHERE o.session_id = h.session_id
           AND o.status IN ('claimed', 'running', 'waiting') LIMIT 1) IS NULL
    LIMIT ?),
queued_sessions (session_id) AS (
    (SELECT session_id FROM runs WHERE status = 'queued' AND session_id IS NOT NULL
       AND (SELECT count(*) FROM early) = {_EARLY} AND (SELECT count(*) FROM early_heads) < ?
     ORDER BY session_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.session_id FROM runs r WHERE r.status = 'queued' AND r.session_id > q.session_id
            ORDER BY r.session_id LIMIT 1)
    FROM queued_sessions q WHERE q.session_id IS NOT NULL),
heads AS (
    SELECT (SELECT r.id FROM runs r WHERE r.session_id = q.session_id AND r.status = 'queued'
            ORDER BY r.created_at, r.pos LIMIT 1) AS id
    FROM queued_sessions q
    WHERE q.session_id IS NOT NULL
      AND (SELECT 1 FROM runs o WHERE o.session_id = q.session_id
           AND o.status IN ('claimed', 'running', 'waiting') LIMIT 1) IS NULL),
pick AS (
    SELECT r.id FROM runs r
    WHERE r.id = ANY (ARRAY(SELECT id FROM early_heads UNION ALL SELECT id FROM heads))
      AND r.status = 'queued'
    ORDER BY r.created_at, r.pos
    LIMIT ?
    FOR UPDATE SKIP LOCKED)
UPDATE runs SET status = 'running', attempt = attempt + 1, started_at = coalesce(started_at, ?),
       error_code = NULL, error = NULL, updated_at = GREATEST(updated_at, ?),
       lease_owner = ?, lease_expires_at = {_DB_NOW} + ?
WHERE id IN (SELECT id FROM pick)
RETURNING {runs_q.COLUMNS}{runs_q.QUEUED_EXTRA}
"""

_EXPIRED = f"""
SELECT {runs_q.COLUMNS} FROM runs
WHERE status IN ('claimed', 'running') AND lease_expires_at < {_DB_NOW}
ORDER BY created_at, pos
FOR UPDATE SKIP LOCKED
"""


def claim(conn, owner: str, lease_ms: int, now: int, limit: int) -> list[dict]:
    """Up to `limit` queued runs, now running under `owner`'s lease, oldest first; each is the
    RunInfo with the runtime's keys (`runs.queued_runs_of_session`'s userEventId and
    modelOverride)."""
    rows = conn.execute(_CLAIM, (limit, limit, limit, now, now, owner, lease_ms)).fetchall()
    claimed = runs_q.queued_rows(rows)
    claimed.sort(key=lambda r: r["createdAt"])
    return claimed


def renew(conn, owner: str, run_ids: list[str], lease_ms: int) -> set[str]:
    """Push the lease of each of `run_ids` that `owner` still holds; returns those ids (a run
    missing from the answer was ended, or requeued after its lease ran out, by someone else)."""
    if not run_ids:
        return set()
    rows = conn.execute(
        f"UPDATE runs SET lease_expires_at = {_DB_NOW} + ?"
        " WHERE id = ANY(?) AND lease_owner = ? AND status IN ('claimed', 'running') RETURNING id",
        (lease_ms, list(run_ids), owner)).fetchall()
    return {row[0] for row in rows}


def requeue_expired(conn, now: int) -> list[dict]:
    """Claimed or running runs whose lease ran out go back to 'queued' (lease cleared);
    returns them as moved, oldest first. Rows another transaction holds are left for later."""
    out = []
    for row in conn.execute(_EXPIRED).fetchall():
        moved = runs_q.move_run(conn, runs_q.run_info(row), "queued", now)
        if moved is not None:
            out.append(moved)
    return out


def release(conn, owner: str, run_ids: list[str], now: int) -> list[dict]:
    """A server stopping cleanly hands its runs back to the queue at once, instead of making
    the others wait for the lease to run out; returns the runs it moved."""
    if not run_ids:
        return []
    rows = conn.execute(
        f"SELECT {runs_q.COLUMNS} FROM runs WHERE id = ANY(?) AND lease_owner = ?"
        " AND status IN ('claimed', 'running') FOR UPDATE",
        (list(run_ids), owner)).fetchall()
    out = []
    for row in rows:
        moved = runs_q.move_run(conn, runs_q.run_info(row), "queued", now)
        if moved is not None:
            out.append(moved)
    return out


def holds(conn, run_id: str, owner: str, attempt: int) -> bool:
    """Does `owner` still hold the run, in the same attempt (a run requeued and claimed again by
    the same server is a new attempt, which the old turn must not answer)? Locks the row until
    the transaction ends, so no requeue or cancel on another server can slip between this answer
    and the transaction's writes."""
    row = conn.execute(
        "SELECT 1 FROM runs WHERE id = ? AND lease_owner = ? AND attempt = ?"
        " AND status IN ('claimed', 'running') FOR UPDATE", (run_id, owner, attempt)).fetchone()
    return row is not None

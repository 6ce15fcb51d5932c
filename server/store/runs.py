"""Runs: durable executions forming a tree, and the queue the runtime takes work from.

RunInfo = {id, account, rootRunId, parentRunId?, depth, kind, agentId, sessionId?, origin, title,
stepLabel?, planStepId?, status, attempt, createdAt, updatedAt, startedAt?, finishedAt?, usage?,
error?: {code, message}, unmetObligations?, plan?}: `plan` is the session's checklist frozen on the
run that made it once it settled (`set_plan`); `stepLabel`/`planStepId` name the parent's plan step
a child was spawned under.

Every status change goes through `transition` (pure: checks the move, stamps the times) and is
written with `save_run`, which writes only if the row is still in the status the change started
from: whoever moved the run first (a cancel, a deletion, the runtime) wins and the other write
does nothing. Order among runs created in the same millisecond falls back to rowid, i.e.
insertion order, so the queue stays FIFO.
"""
from __future__ import annotations

from seed_agents.protocol.api.actions import RUN_STATUSES as STATUSES  # the contract's list, kept once

from ..database.port import Conn, execute_later
from . import codec
from .errors import NotFound

TERMINAL = frozenset({"succeeded", "failed", "canceled"})
LIVE = frozenset(STATUSES) - TERMINAL
# The legal moves. running -> queued is the requeue of a run a dead process left behind.
_MOVES = {
    "queued": frozenset({"claimed", "running", "failed", "canceled"}),
    "claimed": frozenset({"queued", "running", "failed", "canceled"}),
    "running": frozenset({"queued", "waiting", "succeeded", "failed", "canceled"}),
    "waiting": frozenset({"queued", "running", "succeeded", "failed", "canceled"}),
}

COLUMNS = ("id, account_id, root_run_id, parent_run_id, depth, kind, agent_id, session_id, origin,"
           " title, status, attempt, created_at, updated_at, started_at, finished_at, usage,"
           " error_code, error, unmet_obligations, wait, parent_tool_call_id, plan, step_label, plan_step_id,"
           " source_text, continued_from_run_id, error_detail")
_N = 28
# The WHERE of the partial index runs_active_by_session, written out verbatim: SQLite uses a
# partial index only when the query repeats its condition, so "status = 'queued'" alone would
# walk the session's whole run history.
ACTIVE = "status IN ('queued', 'claimed', 'running', 'waiting')"


class IllegalTransition(ValueError):
    """A run cannot move from its status to the one asked (e.g. out of a terminal status)."""


def transition(run: dict, to: str, now: int, *, error: dict | None = None,
               usage: dict | None = None) -> dict:
    """The RunInfo after moving `run` to `to` at `now`; raises IllegalTransition.

    Entering 'running' counts an attempt and stamps startedAt the first time; a terminal status
    stamps finishedAt. `error` ({code, message}) is set on 'failed' and cleared on any other
    move, so the error always explains the current status. `usage` replaces the run's usage."""
    frm = run["status"]
    if to not in _MOVES.get(frm, ()):
        raise IllegalTransition(f"run {run['id']} cannot go from {frm} to {to}")
    out = dict(run)
    out["status"] = to
    out["updatedAt"] = max(run["updatedAt"], now)  # a clock step back must not reorder
    out.pop("error", None)
    if to != "waiting":
        out.pop("wait", None)
    if to == "running":
        out["attempt"] = run["attempt"] + 1
        out.setdefault("startedAt", now)
    if to in TERMINAL:
        out["finishedAt"] = now
    if to == "failed":
        out["error"] = error or {"code": "run-failed", "message": "the run failed"}
    if usage is not None:
        out["usage"] = usage
    return out


_SAVE = ("UPDATE runs SET status = ?, attempt = ?, updated_at = ?, started_at = ?, finished_at = ?,"
         " usage = ?, error_code = ?, error = ?{lease}{wait} WHERE id = ? AND status = ?")
# A move to any status but 'waiting' ends a wait (seed_agents.server.store.parking writes the move into it).
_UNWAIT = ", wait = NULL, wake_at = NULL"
_SAVE_SQLITE = _SAVE.format(lease="", wait=_UNWAIT)
# On a shared store (PostgreSQL) a run holds a lease exactly while claimed or running
# (runs_lease_check): a move to any other status ends it. Moves into claimed/running take a
# lease, which only seed_agents.server.store.leases.claim gives.
_SAVE_LEASE_ENDS = _SAVE.format(lease=", lease_owner = NULL, lease_expires_at = NULL", wait=_UNWAIT)
_SAVE_WAITING = {False: _SAVE.format(lease="", wait=""),
                 True: _SAVE.format(lease=", lease_owner = NULL, lease_expires_at = NULL", wait="")}


def save_run(conn: Conn, before: str, run: dict) -> bool:
    """Write `run`'s mutable fields if the row is still in status `before`; False otherwise
    (someone else moved or deleted it first, and nothing was written). A plan frozen on the run
    since `run` was read (the plan verb, mid-turn) is put into `run`, so what is published of
    the move keeps it."""
    error = run.get("error")
    usage = run.get("usage")
    ends_lease = conn.traits.run_leases and run["status"] not in ("claimed", "running")
    if run["status"] == "waiting":
        sql = _SAVE_WAITING[ends_lease]
    else:
        sql = _SAVE_LEASE_ENDS if ends_lease else _SAVE_SQLITE
    rows = conn.execute(   # (the plan comes back with the write: one round trip, not two)
        sql + " RETURNING plan",
        (run["status"], run["attempt"], run["updatedAt"], run.get("startedAt"), run.get("finishedAt"),
         None if usage is None else codec.encode(usage),
         None if error is None else error["code"], None if error is None else error["message"],
         run["id"], before)).fetchall()
    if len(rows) != 1:
        return False
    if "plan" not in run and rows[0][0] is not None:
        run["plan"] = codec.decode(rows[0][0])
    return True


def move_run(conn: Conn, run: dict, to: str, now: int, **kw) -> dict | None:
    """transition + save_run: the new RunInfo, or None when the row had already moved."""
    moved = transition(run, to, now, **kw)
    return moved if save_run(conn, run["status"], moved) else None


def tree_position(run_id: str, parent: dict | None) -> tuple[str, str | None, int]:
    """(root run id, parent run id, depth) of a new run under `parent` (a RunInfo), or a root."""
    if parent is None:
        return run_id, None, 0
    return parent["rootRunId"], parent["id"], parent["depth"] + 1


def create_run(conn: Conn, run_id: str, account_id: str, agent_id: str,
               session_id: str | None, user_event_id: str | None, now: int, *,
               title: str = "", origin: str = "user", parent: dict | None = None) -> dict:
    """A queued run; a root unless `parent` (a RunInfo) is given."""
    root, parent_id, depth = tree_position(run_id, parent)
    execute_later(
        conn, "INSERT INTO runs (id, account_id, agent_id, session_id, user_event_id, status, attempt,"
        " created_at, updated_at, root_run_id, parent_run_id, depth, kind, origin, title)"
        " VALUES (?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?, ?, 'agent', ?, ?)",
        (run_id, account_id, agent_id, session_id, user_event_id, now, now, root, parent_id, depth,
         origin, title))
    return run_info((run_id, account_id, root, parent_id, depth, "agent", agent_id, session_id, origin,
                     title, "queued", 0, now, now, None, None, None, None, None, None, None, None, None, None, None,
                     None, None, None))


def get_run(conn: Conn, run_id: str) -> dict | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else run_info(row)


def set_run_status(conn: Conn, run_id: str, status: str, now: int, *,
                   error: dict | None = None, usage: dict | None = None) -> dict:
    """Read the run, move it through `transition`, write it (tests and one-off fixes)."""
    run = get_run(conn, run_id)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    moved = move_run(conn, run, status, now, error=error, usage=usage)
    assert moved is not None  # read and written in one transaction
    return moved


def user_event_of(conn: Conn, run_id: str) -> str | None:
    row = conn.execute("SELECT user_event_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def queued_rows(rows: list) -> list[dict]:
    """RunInfo plus the runtime's own keys: userEventId (when set) and modelOverride (the
    session's, when set), read in the same statement so a turn needs no second lookup."""
    out = []
    for row in rows:
        info = run_info(row[:_N])
        if row[_N] is not None:
            info["userEventId"] = row[_N]
        if row[_N + 1] is not None:
            info["modelOverride"] = codec.decode(row[_N + 1])
        out.append(info)
    return out


QUEUED_EXTRA = ", user_event_id, (SELECT s.model_override FROM sessions s WHERE s.id = runs.session_id)"


def queued_runs(conn: Conn, limit: int) -> list[dict]:
    """Queued runs, oldest first (with userEventId / modelOverride, see `queued_rows`)."""
    return queued_rows(conn.execute(
        f"SELECT {COLUMNS}{QUEUED_EXTRA} FROM runs WHERE status = 'queued'"
        " ORDER BY created_at, rowid LIMIT ?", (limit,)).fetchall())


def queued_runs_of_session(conn: Conn, session_id: str, limit: int) -> list[dict]:
    """The session's queued runs, oldest first (the per-session worker takes them in order);
    none while a run of the session is parked (it goes first once woken, as on a shared store)."""
    # Two index lookups whatever the queue's length (docs/performance.md, "A deep queue"): the
    # oldest queued run by runs_active_by_session's order, and whether one is parked by
    # runs_waiting_by_session (scanning the session's active runs for that grew with the queue).
    # The CASTs keep the cached statement: SQLite 3.54 (apsw's) re-prepares a statement at every
    # call when a bare `?` is the LIMIT or equals the index column its ORDER BY follows (38 µs a
    # call against 7.5; docs/performance.md, "Taking the next queued run"). Same plan, same rows.
    return queued_rows(conn.execute(
        f"SELECT {COLUMNS}{QUEUED_EXTRA} FROM runs WHERE session_id = CAST(? AS TEXT) AND {ACTIVE}"
        " AND status = 'queued' AND NOT EXISTS (SELECT 1 FROM runs w WHERE w.session_id = ?"
        " AND w.status = 'waiting')"
        " ORDER BY created_at, rowid LIMIT CAST(? AS BIGINT)", (session_id, session_id, limit)).fetchall())


def has_active_run(conn: Conn, session_id: str) -> bool:
    """Whether a run of the session is queued, claimed, running or parked (one index lookup)."""
    return conn.execute(f"SELECT 1 FROM runs WHERE session_id = ? AND {ACTIVE} LIMIT 1",
                        (session_id,)).fetchone() is not None


def active_runs_of_session(conn: Conn, session_id: str) -> list[dict]:
    """Live (non-terminal) runs of the session, oldest first."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM runs WHERE session_id = ? AND {ACTIVE}"
        " ORDER BY created_at, rowid", (session_id,)).fetchall()
    return [run_info(row) for row in rows]


def cancel_runs(conn: Conn, runs: list[dict], now: int) -> list[dict]:
    """Every live run of `runs` becomes 'canceled'; returns the ones this call moved."""
    out = []
    for run in runs:
        if run["status"] in LIVE:
            moved = move_run(conn, run, "canceled", now)
            if moved is not None:
                out.append(moved)
                # (a parked run stops listening: its waits go with its wait)
                conn.execute("DELETE FROM run_event_waits WHERE run_id = ?", (run["id"],))
    return out


def latest_run_of_session(conn: Conn, session_id: str) -> dict | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM runs WHERE session_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
        (session_id,)).fetchone()
    return None if row is None else run_info(row)


def requeue_interrupted(conn: Conn, now: int) -> list[str]:
    """Runs a dead process left claimed or running go back to 'queued'; their ids, oldest first."""
    rows = conn.execute(f"SELECT {COLUMNS}, rowid FROM runs WHERE status IN ('claimed', 'running')").fetchall()
    rows.sort(key=lambda row: (row[12], row[_N]))  # created_at, then rowid: oldest first, no SQL sort
    return [r["id"] for r in (run_info(row[:_N]) for row in rows) if move_run(conn, r, "queued", now)]


def session_status_from_runs(conn: Conn, session_id: str) -> str:
    """'streaming' while a run of the session is live, 'error' when its latest run failed,
    else 'idle' (CONTRACT section 4)."""
    # (has_active_run and latest_run_of_session's status in one statement: one round trip.)
    row = conn.execute(
        f"SELECT (SELECT 1 FROM runs WHERE session_id = ?1 AND {ACTIVE} LIMIT 1),"
        " (SELECT status FROM runs WHERE session_id = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1)"
        " FROM sessions WHERE id = ?1", (session_id,)).fetchone()
    if row is None:
        return "idle"   # no such session (its runs went with it)
    if row[0] is not None:
        return "streaming"
    return "error" if row[1] == "failed" else "idle"


# -- listing ---------------------------------------------------------------------------------

def _runs_where(conn: Conn, where: str, params: list, status: str | None, order: str,
                limit: int) -> list[dict]:
    if status is not None:
        where, params = where + " AND status = ?", params + [status]
    rows = conn.execute(f"SELECT {COLUMNS} FROM runs WHERE {where} ORDER BY {order} LIMIT ?",
                        (*params, limit)).fetchall()
    return [run_info(row) for row in rows]


def runs_of_tree(conn: Conn, root_run_id: str, status: str | None, limit: int) -> list[dict]:
    """A tree's runs, oldest first (for drawing the tree)."""
    return _runs_where(conn, "root_run_id = ?", [root_run_id], status, "created_at, rowid", limit)


def runs_of_session(conn: Conn, session_id: str, status: str | None, limit: int) -> list[dict]:
    """The root runs that reference the session, newest first."""
    return _runs_where(conn, "session_id = ? AND parent_run_id IS NULL", [session_id], status,
                       "created_at DESC, rowid DESC", limit)


def runs_of_agent(conn: Conn, agent_id: str, status: str | None, limit: int) -> list[dict]:
    """The agent's runs, newest first."""
    return _runs_where(conn, "agent_id = ?", [agent_id], status, "created_at DESC, rowid DESC", limit)


def descendants(tree: list[dict], run_id: str) -> list[dict]:
    """The runs of `tree` (one root's runs) below `run_id`, parents before children."""
    children: dict[str, list[dict]] = {}
    for run in tree:
        if "parentRunId" in run:
            children.setdefault(run["parentRunId"], []).append(run)
    out, stack = [], [run_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            out.append(child)
            stack.append(child["id"])
    return out


def run_info(row: tuple) -> dict:
    (run_id, account_id, root, parent, depth, kind, agent_id, session_id, origin, title, status, attempt,
     created_at, updated_at, started_at, finished_at, usage, error_code, error, unmet, wait, tool_call,
     plan, step_label, step_id, source, continued_from, error_detail) = row
    # (a run with a script is a workflow: the column's CHECK keeps `agent`, schema/migrations/0014)
    info = {"id": run_id, "account": account_id, "rootRunId": root, "depth": depth,
            "kind": "workflow" if source is not None else kind,
            "agentId": agent_id, "origin": origin, "title": title, "status": status, "attempt": attempt,
            "createdAt": created_at, "updatedAt": updated_at}
    if parent is not None:
        info["parentRunId"] = parent
    if session_id is not None:
        info["sessionId"] = session_id
    if started_at is not None:
        info["startedAt"] = started_at
    if finished_at is not None:
        info["finishedAt"] = finished_at
    if usage is not None:
        info["usage"] = codec.decode(usage)
    if error is not None:
        info["error"] = {"code": error_code or "run-failed", "message": error}
        if error_detail is not None:   # a workflow's: {stack?, tool?, callSeq?}
            info["error"].update(codec.decode(error_detail))
    if unmet is not None:
        info["unmetObligations"] = codec.decode(unmet)
    if tool_call is not None:
        info["parentToolCallId"] = tool_call
    if wait is not None and status == "waiting":
        info["wait"] = wait_info(codec.decode(wait))
    if plan is not None:
        info["plan"] = codec.decode(plan)
    if step_label is not None:
        info["stepLabel"] = step_label
    if step_id is not None:
        info["planStepId"] = step_id
    if source is not None:
        info["sourceText"] = source
    if continued_from is not None:
        info["continuedFromRunId"] = continued_from
    return info


def wait_info(wait: dict) -> dict:
    """The wire RunWaitInfo of a stored wait: children as a count, an event wait's timeout as
    wakeAt, a budget pause's note as label (the reference's mapping)."""
    reason = wait["reason"]
    out: dict = {"reason": reason}
    if reason == "children":
        out["pendingChildren"] = len(wait.get("toolCallIds", ()))
    elif reason == "timer":
        out["wakeAt"] = wait["wakeAt"]
    elif reason == "event":
        if wait.get("timeoutAt") is not None:
            out["wakeAt"] = wait["timeoutAt"]
        for key in ("label", "answerWith"):
            if wait.get(key):
                out[key] = wait[key]
    elif reason == "budget-pause" and wait.get("note"):
        out["label"] = wait["note"]
    return out


def set_usage(conn: Conn, run_id: str, usage: dict) -> dict | None:
    """The run's usage so far (the tool loop writes it at each step); the RunInfo, or None when
    the run is no longer running."""
    row = conn.execute(f"UPDATE runs SET usage = ? WHERE id = ? AND status = 'running' RETURNING {COLUMNS}",
                       (codec.encode(usage), run_id)).fetchone()
    return None if row is None else run_info(row)


def set_unmet_obligations(conn: Conn, run: dict, obligations: list[dict]) -> dict:
    """Record what the run ended owing (the tool loop's plan obligations); the RunInfo with it."""
    conn.execute("UPDATE runs SET unmet_obligations = ? WHERE id = ?", (codec.encode(obligations), run["id"]))
    return {**run, "unmetObligations": obligations}


def set_plan(conn: Conn, run_id: str, plan: dict) -> dict | None:
    """Freeze a settled checklist on the run that made it (a later turn's new plan replaces the
    session's, never this copy); the RunInfo after it, or None when the run is gone."""
    row = conn.execute(f"UPDATE runs SET plan = ? WHERE id = ? RETURNING {COLUMNS}",
                       (codec.encode(plan), run_id)).fetchone()
    return None if row is None else run_info(row)


def set_error_detail(conn: Conn, run_id: str, detail: dict) -> None:
    """What a workflow's failure knew besides its code and message: {stack?, tool?, callSeq?}."""
    conn.execute("UPDATE runs SET error_detail = ? WHERE id = ?", (codec.encode(detail), run_id))


def make_workflow(conn: Conn, run: dict, source: str, continued_from: str | None = None) -> dict:
    """A run just created becomes a workflow: its script (and the run it continues)."""
    conn.execute("UPDATE runs SET source_text = ?, continued_from_run_id = ? WHERE id = ?",
                 (source, continued_from, run["id"]))
    out = {**run, "kind": "workflow", "sourceText": source}
    if continued_from is not None:
        out["continuedFromRunId"] = continued_from
    return out


def set_plan_step(conn: Conn, run: dict, step: dict) -> dict:
    """Stamp a child with the parent's plan step it works on ({id, label}); the RunInfo with it."""
    conn.execute("UPDATE runs SET step_label = ?, plan_step_id = ? WHERE id = ?",
                 (step["label"], step["id"], run["id"]))
    return {**run, "stepLabel": step["label"], "planStepId": step["id"]}


def with_child_counts(conn: Conn, runs: list[dict]) -> list[dict]:
    """Each run with `childRunCount`, how many runs it spawned (omitted when none), as the
    reference's GetRun and ListRuns give it: the desktop shows a run that delegated as a record
    row of its own. One grouped query per 500 runs."""
    counts: dict[str, int] = {}
    ids = [run["id"] for run in runs]
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        counts.update(conn.execute(f"SELECT parent_run_id, count(*) FROM runs WHERE parent_run_id IN ({marks})"
                                   " GROUP BY parent_run_id", chunk).fetchall())
    return [{**run, "childRunCount": counts[run["id"]]} if counts.get(run["id"]) else run for run in runs]


def public(run: dict) -> dict:
    """The RunInfo without the runtime's own keys (what clients see)."""
    return {k: v for k, v in run.items() if k not in ("userEventId", "modelOverride")}


def child_of_call(conn: Conn, parent_run_id: str, tool_call_id: str) -> tuple[str, str] | None:
    """(run id, session id) of the child a parent's tool call started, or None."""
    row = conn.execute("SELECT id, session_id FROM runs WHERE parent_run_id = ? AND parent_tool_call_id = ?",
                       (parent_run_id, tool_call_id)).fetchone()
    return None if row is None else (row[0], row[1])


def first_run_of_session(conn: Conn, session_id: str) -> str | None:
    row = conn.execute("SELECT id FROM runs WHERE session_id = ? ORDER BY created_at, id LIMIT 1",
                       (session_id,)).fetchone()
    return None if row is None else row[0]


def status_of(conn: Conn, run_id: str) -> str | None:
    row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def successor_of(conn: Conn, run_id: str) -> dict | None:
    """The run a workflow run continues in (its `continued_from_run_id` names this one), if made."""
    row = conn.execute(f"SELECT {COLUMNS} FROM runs WHERE continued_from_run_id = ?", (run_id,)).fetchone()
    return None if row is None else run_info(row)


def hand_over_call(conn: Conn, from_run_id: str, to_run_id: str, parent_tool_call_id: str | None,
                   spec: dict, budget: dict) -> None:
    """A delegate call's one child run passes to its successor (the predecessor lets go of the
    call first), with the child's input and token budget."""
    conn.execute("UPDATE runs SET parent_tool_call_id = NULL WHERE id = ?", (from_run_id,))
    conn.execute("UPDATE runs SET parent_tool_call_id = ?, input = ?, budget = ? WHERE id = ?",
                 (parent_tool_call_id, codec.encode(spec), codec.encode(budget), to_run_id))

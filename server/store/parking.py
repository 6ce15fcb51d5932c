"""Parked runs: a run waiting on its children, a signal or the clock, and what wakes it.

A parked run is 'waiting' with its reason in `runs.wait` (the storage design's RunWait:
{reason: children, toolCallIds} | {reason: event, waitId, timeoutAt?, label?, answerWith?} |
{reason: timer, wakeAt} | {reason: budget-pause, note?}) and, when the clock may end the wait,
`runs.wake_at`. It holds no worker and no lease. Waking is a conditional move out of 'waiting'
in one transaction with what the wake delivers (a journal entry), so whichever waker commits
first wins and the others write nothing: a run is woken once, whichever server wakes it.

On PostgreSQL the waker locks the run's row first (`lock_run`), and so does a parker: a child
that ends while its parent is parking either commits first (the parker then sees it ended and
does not wait for it) or sees the parent parked (and shrinks its wait); never neither.
"""
from __future__ import annotations

import uuid

from seed_agents.protocol.agent import workflows
from seed_agents.protocol.hm import hm_activity

from . import codec
from . import events as events_q
from . import journal as journal_q
from . import runs as runs_q


def lock_run(conn, run_id: str) -> dict | None:
    """The run as it is now, its row locked until the transaction ends (PostgreSQL; SQLite's
    one writer already serializes)."""
    row = conn.execute(f"SELECT {runs_q.COLUMNS} FROM runs WHERE id = ?{conn.traits.lock_rows}", (run_id,)).fetchone()
    return None if row is None else runs_q.run_info(row)


def stored_wait(conn, run_id: str) -> dict | None:
    row = conn.execute("SELECT wait FROM runs WHERE id = ? AND status = 'waiting'", (run_id,)).fetchone()
    return None if row is None or row[0] is None else codec.decode(row[0])


def wake_time(wait: dict) -> int | None:
    if wait["reason"] == "timer":
        return wait["wakeAt"]
    if wait["reason"] == "event":
        return wait.get("timeoutAt")
    return None


def park(conn, run: dict, wait: dict, now: int, *, match: dict | None = None) -> dict | None:
    """Move a running run to 'waiting' for `wait`; an event wait also registers what would
    answer it (`match`, e.g. {signal}). None when the run had already moved (canceled)."""
    moved = runs_q.transition(run, "waiting", now)
    if not runs_q.save_run(conn, run["status"], moved):
        return None
    conn.execute("UPDATE runs SET wait = ?, wake_at = ? WHERE id = ?",
                 (codec.encode(wait), wake_time(wait), run["id"]))
    if wait["reason"] == "event":
        conn.execute("INSERT INTO run_event_waits (run_id, wait_id, account_id, match, timeout_at, created_at)"
                     " VALUES (?, ?, ?, ?, ?, ?)",
                     (run["id"], wait["waitId"], run["account"], codec.encode(match or {}),
                      wait.get("timeoutAt"), now))
    moved["wait"] = runs_q.wait_info(wait)
    return moved


def wake(conn, run: dict, now: int, resolution: dict | None = None,
         answer: tuple[dict, object] | None = None) -> tuple[dict, dict | None] | None:
    """The waiting `run` (as locked) goes back to the queue, `resolution` journaled with it;
    (the moved run, the journal entry) or None when it was not waiting any more. `answer`
    (the wait, its output): a wait that a tool call opened is answered in the run's session,
    as that call's `tool_result`, so the model reads what woke it (`woken_answer`)."""
    moved = runs_q.move_run(conn, run, "queued", now)
    if moved is None:
        return None
    conn.execute("DELETE FROM run_event_waits WHERE run_id = ?", (run["id"],))
    entry = None if resolution is None else journal_q.append(conn, run["id"], resolution, now)
    if answer is not None and answer[0].get("toolCallId") and "sessionId" in run:
        payload = {"type": "tool_result", "toolCallId": answer[0]["toolCallId"], "name": "call", "output": answer[1],
                   "actor": "agent", "meta": {"runId": run["id"]}}
        moved["_answer"] = (run["sessionId"], *events_q.append_event(conn, run["sessionId"], payload,
                                                                     str(uuid.uuid4()), now))
    return moved, entry


def signal(conn, run_id: str, name: str, payload, now: int) -> tuple[dict, dict | None] | None:
    """SignalRun: deliver `name` (and `payload`) to the run if it waits for it; (woken run,
    journal entry) or None (not waiting, or waiting for something else). A budget pause takes
    any signal as permission to go on."""
    run = lock_run(conn, run_id)
    if run is None or run["status"] != "waiting":
        return None
    wait = stored_wait(conn, run_id)
    if wait is None:
        return None
    if wait["reason"] == "budget-pause":
        return wake(conn, run, now, {"kind": "event", "delivery": {"source": "signal", "signal": name}})
    if wait["reason"] != "event":
        return None
    for wait_id, match in conn.execute("SELECT wait_id, match FROM run_event_waits WHERE run_id = ?"
                                       " ORDER BY created_at", (run_id,)).fetchall():
        if signal_matches(codec.decode(match), name):
            delivery: dict = {"source": "signal", "signal": name}
            if payload is not None:
                delivery["payload"] = payload
            entry = {"kind": "event", "waitId": wait_id, "delivery": delivery}
            if wait.get("callSeq") is not None:
                entry["callSeq"] = wait["callSeq"]
            return wake(conn, run, now, entry, (wait, {"delivered": True, **delivery}))
    return None


def signal_agent(conn, account_id: str, agent_id: str, name: str, payload, now: int) -> tuple[dict, dict | None] | None:  # noqa: ANN001
    """A signal without a run (a trigger's `wake` continuation): the agent's oldest open wait
    this signal answers is delivered, as `signal` would; None when no wait takes it. (The
    account's waits by their index, kept to this agent's runs.)"""
    rows = conn.execute("SELECT w.run_id, w.match FROM run_event_waits w JOIN runs r ON r.id = w.run_id"
                        " WHERE w.account_id = ? AND r.agent_id = ? ORDER BY w.created_at",
                        (account_id, agent_id)).fetchall()
    for run_id, match in rows:
        if signal_matches(codec.decode(match), name):
            done = signal(conn, run_id, name, payload, now)
            if done is not None:
                return done
    return None


def activity_wait_accounts(conn) -> dict[str, int]:
    """Accounts with a parked run waiting on the activity feed: {account: its oldest wait's time}
    (the activity monitor polls their feeds as it polls those of activity triggers)."""
    out: dict[str, int] = {}
    for account, match, created in conn.execute("SELECT account_id, match, created_at FROM run_event_waits"
                                                 " ORDER BY created_at").fetchall():
        if account not in out and workflows.watches_activity(codec.decode(match)):
            out[account] = created
    return out


def deliver_activity(conn, account_id: str, event: dict, payload: dict,
                     now: int) -> list[tuple[dict, dict | None]]:
    """An activity-feed event answers each of the account's waits it matches (the reference's
    delivery: {source: activity, payload: the event, as kept}); the runs woken, each once."""
    done = []
    rows = conn.execute("SELECT run_id, wait_id, match FROM run_event_waits WHERE account_id = ? ORDER BY created_at",
                        (account_id,)).fetchall()
    for run_id, wait_id, match in rows:
        if not hm_activity.matches_wait(codec.decode(match), event):
            continue
        run = lock_run(conn, run_id)
        wait = stored_wait(conn, run_id) if run is not None and run["status"] == "waiting" else None
        if wait is None or wait["reason"] != "event":
            continue
        delivery = {"source": "activity", "payload": payload}
        entry = {"kind": "event", "waitId": wait_id, "delivery": delivery}
        if wait.get("callSeq") is not None:
            entry["callSeq"] = wait["callSeq"]
        woke = wake(conn, run, now, entry, (wait, {"delivered": True, **delivery}))
        if woke is not None:
            done.append(woke)
    return done


def run_agent(conn, run_id: str) -> str | None:  # noqa: ANN001
    row = conn.execute("SELECT agent_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def signal_matches(match: dict, name: str) -> bool:
    """A wait naming a signal takes that one; a wait with no criteria takes any (reference)."""
    if match.get("signal") is not None:
        return match["signal"] == name
    return not any(match.get(k) is not None for k in ("eventType", "resource", "author"))


def due(conn, now: int, limit: int) -> list[str]:
    """Waiting runs whose wake time has come, oldest deadline first."""
    rows = conn.execute("SELECT id FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= ?"
                        " ORDER BY wake_at LIMIT ?", (now, limit)).fetchall()
    return [r[0] for r in rows]


def next_wake(conn) -> int | None:
    row = conn.execute("SELECT min(wake_at) FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL").fetchone()
    return None if row is None else row[0]


def time_out(conn, run_id: str, now: int) -> tuple[dict, dict | None] | None:
    """The clock's wake: a timer fires, an event wait times out (delivering nothing)."""
    run = lock_run(conn, run_id)
    if run is None or run["status"] != "waiting":
        return None
    wait = stored_wait(conn, run_id)
    if wait is None or (wake_time(wait) or now + 1) > now:
        return None
    if wait["reason"] == "timer":
        entry = {"kind": "fired", "wakeAt": wait["wakeAt"]}
    else:
        entry = {"kind": "event", "waitId": wait["waitId"], "timedOut": True}
    if wait.get("callSeq") is not None:
        entry["callSeq"] = wait["callSeq"]
    return wake(conn, run, now, entry, (wait, {"delivered": False, "timedOut": True}))


def child_ended(conn, child: dict, now: int) -> tuple[dict, dict | None] | None:
    """A child run ended: its parent, if parked on it, stops waiting for it; the parent woken
    (its last child) or with its smaller wait, or None when the parent was not waiting on it."""
    parent_id, call_id = child.get("parentRunId"), child.get("parentToolCallId")
    if parent_id is None or call_id is None:
        return None
    parent = lock_run(conn, parent_id)
    if parent is None or parent["status"] != "waiting":
        return None
    wait = stored_wait(conn, parent_id)
    if wait is None or wait["reason"] != "children" or call_id not in wait["toolCallIds"]:
        return None
    rest = [c for c in wait["toolCallIds"] if c != call_id]
    if not rest:
        return wake(conn, parent, now, {"kind": "fired", "reason": "children"})
    smaller = {**wait, "toolCallIds": rest}
    conn.execute("UPDATE runs SET wait = ?, updated_at = ? WHERE id = ? AND status = 'waiting'",
                 (codec.encode(smaller), max(parent["updatedAt"], now), parent_id))
    return {**parent, "updatedAt": max(parent["updatedAt"], now), "wait": runs_q.wait_info(smaller)}, None


def live_children_of_calls(conn, parent_id: str, call_ids: list[str]) -> list[str]:
    """Of the parent's delegate calls, those whose child run is still live (not ended)."""
    if not call_ids:
        return []
    rows = conn.execute("SELECT parent_tool_call_id FROM runs WHERE parent_run_id = ?"
                        f" AND parent_tool_call_id IS NOT NULL AND {runs_q.ACTIVE}",
                        (parent_id,)).fetchall()
    live = {r[0] for r in rows}
    return [c for c in call_ids if c in live]


def end_waits(conn, run_ids) -> None:
    """Runs that ended (canceled, deleted) stop listening."""
    for run_id in run_ids:
        conn.execute("DELETE FROM run_event_waits WHERE run_id = ?", (run_id,))

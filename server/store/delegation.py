"""Delegation in the store: child sessions with child runs under the caller's run, and what a
child's ending does to its parent, each in the transaction that causes it.

A child is a session (parent_session_id, run_id) whose first event is the brief, and a queued
run under the caller's run (parent, root, depth + 1, parent_tool_call_id = the delegate call).
The parent's session gets a `tool_spawn` event at once, so a transcript can open the child while
it works. When the child ends (succeeded, failed, canceled) its result is recorded on the
parent, whatever the parent is doing: a `tool_result` event in the parent's session (the
delegate call's answer, which the parent's model reads when it resumes) and a `result` entry in
the parent's journal; a parent parked on that call stops waiting for it (seed_agents.server.store.parking).

Cancelling a run cancels its whole subtree (`cancel_subtrees`), and a canceled child whose
parent lives on is answered `canceled` like any other ending.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..database.port import execute_later
from . import codec, parking, turns
from . import events as events_q
from . import journal as journal_q
from . import runs as runs_q
from . import sessions as sessions_q
from . import visitors as visitors_q
from .errors import NotFound

MAX_DEPTH = 3              # a child's depth is at most this (the reference's limit)
MAX_CHILDREN_PER_SESSION = 10
MAX_TREE = 10_000
MIN_CHILD_TOKENS = 1_000   # a share of the parent's budget smaller than this makes no child


@dataclass
class Settled:
    """What a transaction did to run trees, for publishing after its commit."""

    runs: list[dict] = field(default_factory=list)          # RunInfo changes
    appends: list[tuple[str, dict, bytes]] = field(default_factory=list)   # (session, event, body)
    journal: list[tuple[dict, dict]] = field(default_factory=list)         # (run, journal entry)
    sessions: list[dict] = field(default_factory=list)      # SessionInfo changes
    woken: list[dict] = field(default_factory=list)         # runs back in the queue
    after: list = field(default_factory=list)               # what ended runs started (run-completed)

    def merge(self, other: "Settled") -> None:
        for name in ("runs", "appends", "journal", "sessions", "woken", "after"):
            getattr(self, name).extend(getattr(other, name))


def child_count(conn, session_id: str) -> int:
    row = conn.execute("SELECT count(*) FROM sessions WHERE parent_session_id = ?", (session_id,)).fetchone()
    return row[0]


def spawn_child(conn, parent: dict, parent_session_id: str, *, child_session_id: str, child_run_id: str,
                tool_call_id: str, title: str, brief: str, spec: dict, now: int,
                event_ids: tuple[str, str], budget: dict, limits: turns.TurnLimits,
                step: dict | None = None, source: str | None = None) -> turns.Started:
    """The child session (brief as its first user message) and its queued run under `parent`,
    started as every turn is (`turns.start_turn`, under `limits`: a refusal raises errors.Refused
    before anything is written); the parent's session gets the `tool_spawn` event, in the
    effects to publish. `step` ({id, label}): the parent's plan step in progress, stamped on the
    child's run (stepLabel, planStepId) so a client nests the child under it. `source`: a script
    child's module, which makes the run a workflow."""
    # `agentId` (checked by the caller to be the parent's account's) runs another agent as the child.
    started = turns.start_turn(conn, owner=parent["account"], agent_id=spec.get("agentId") or parent["agentId"],
                               session_id=child_session_id, run_id=child_run_id, now=now, limits=limits,
                               message={"type": "message", "role": "user", "content": brief, "actor": "agent"},
                               event_id=event_ids[0],
                               new_session=turns.NewSession(child_session_id, title, parent_session_id),
                               title=title, origin=turns.AGENT, parent=parent)
    conn.execute("UPDATE runs SET parent_tool_call_id = ?, input = ?, budget = ? WHERE id = ?",
                 (tool_call_id, codec.encode(spec), codec.encode(budget), child_run_id))
    started.run["parentToolCallId"] = tool_call_id
    if source is not None:
        started.run.update(runs_q.make_workflow(conn, started.run, source))
    if step is not None:
        started.run.update(runs_q.set_plan_step(conn, started.run, step))
    spawn, body = events_q.append_event(conn, parent_session_id,
                                        {"type": "tool_spawn", "toolCallId": tool_call_id, "name": "delegate",
                                         "runId": child_run_id, "sessionId": child_session_id, "title": title,
                                         "actor": "agent"}, event_ids[1], now)
    started.effects.appended.append((parent_session_id, spawn, body))
    return started


def create_child(conn, parent: dict, parent_session_id: str, **spec) -> tuple[dict, dict, list]:
    """`spawn_child` with no account limits, as (session, run, appends)."""
    started = spawn_child(conn, parent, parent_session_id, limits=turns.UNLIMITED, **spec)
    return started.session, started.run, started.effects.appended


BUDGET_ROW = "SELECT budget FROM runs WHERE id = ?"
INPUT_ROW = "SELECT input FROM runs WHERE id = ?"


def budget_of(conn, run_id: str) -> dict:
    """The run's share of its tree's token budget: {tokens?: what it and its subtree may use
    (absent for a root: the server's --max-run-tokens), spent?: what its own model steps used,
    all its turns, spentByChildren?: what its ended children's subtrees used, reserved?: what its
    live children hold}; {} for a run that has recorded nothing."""
    return budget_from(conn.execute(BUDGET_ROW, (run_id,)).fetchall())


def budget_from(rows: list) -> dict:
    """`budget_of` from BUDGET_ROW's rows read elsewhere (runtime/runner.py, with the turn's others)."""
    return {} if not rows or rows[0][0] is None else codec.decode(rows[0][0])


def _own_spent(budget: dict, run: dict) -> int:
    # (A run from before `spent` was recorded: its usage is the best there is.)
    return budget["spent"] if "spent" in budget else (run.get("usage") or {}).get("total", 0)


def spent_below(budget: dict) -> int:
    """What the run's delegated runs are charged: the ended ones' use, the live ones' shares."""
    return budget.get("spentByChildren", 0) + budget.get("reserved", 0)


def tokens_left(budget: dict, run: dict, server_tokens: int) -> int:
    """Tokens the run may still hand out or spend: its allowance less what it used and what its
    children used or hold. A child is given a share of this when it is spawned and the share is
    reserved on the parent until the child ends; then what the child's subtree used is charged
    instead. So a tree never spends more than its root's allowance (give or take the step that
    crosses a share)."""
    allowance = min(server_tokens, budget.get("tokens", server_tokens))
    return max(0, allowance - _own_spent(budget, run) - spent_below(budget))


def subtree_spent(budget: dict, run: dict) -> int:
    """What an ended run's subtree is charged to its parent: its own use, its ended children's,
    and the shares of children still live (canceled with it, their last steps unknown)."""
    return _own_spent(budget, run) + spent_below(budget)


def _set_budget(conn, run_id: str, budget: dict) -> None:
    execute_later(conn, "UPDATE runs SET budget = ? WHERE id = ?", (codec.encode(budget), run_id))


def record_spent(conn, run_id: str, spent: int) -> None:
    """The run's own tokens so far, all its turns (the tool loop's count, after each step)."""
    budget = budget_of(conn, run_id)
    if budget.get("spent") != spent:
        budget["spent"] = spent
        _set_budget(conn, run_id, budget)


def reserve(conn, run_id: str, tokens: int) -> None:
    """Shares handed to children just spawned, held on the parent until they end."""
    budget = budget_of(conn, run_id)
    budget["reserved"] = budget.get("reserved", 0) + tokens
    _set_budget(conn, run_id, budget)


def child_input(conn, run_id: str) -> dict | None:
    return input_from(conn.execute(INPUT_ROW, (run_id,)).fetchall())


def input_from(rows: list) -> dict | None:
    return None if not rows or rows[0][0] is None else codec.decode(rows[0][0])


def set_output(conn, run_id: str, output) -> None:
    conn.execute("UPDATE runs SET output = ? WHERE id = ?", (codec.encode(output), run_id))


def run_output(conn, run_id: str):
    row = conn.execute("SELECT output FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None or row[0] is None else codec.decode(row[0])


def delegate_answer(child: dict, output) -> dict:
    """The delegate call's output as the reference's outputSchema has it:
    {status, sessionId, runId, output?, error?}."""
    answer: dict = {"status": child["status"], "runId": child["id"]}
    if "sessionId" in child:
        answer["sessionId"] = child["sessionId"]
    if child["status"] == "succeeded" and output is not None:
        answer["output"] = output
    if "error" in child:
        answer["error"] = {"code": child["error"]["code"], "message": child["error"]["message"]}
    elif child["status"] == "canceled":
        answer["error"] = {"code": "canceled", "message": "the child run was canceled"}
    return answer


def children_ended(conn, ended: list[dict], now: int, new_id) -> Settled:  # noqa: ANN001
    """Record each ended child's result on its parent (see the module doc); wake parents whose
    last awaited child this was. Children whose parent ended too record nothing."""
    out = Settled()
    for child in ended:
        parent_id, call_id = child.get("parentRunId"), child.get("parentToolCallId")
        if parent_id is None or call_id is None or child["status"] not in runs_q.TERMINAL:
            continue
        parent = parking.lock_run(conn, parent_id)
        if parent is None or parent["status"] in runs_q.TERMINAL or "sessionId" not in parent:
            continue
        answer = delegate_answer(child, run_output(conn, child["id"]))
        # The child's share goes back to its parent, which is charged what the subtree used.
        child_budget = budget_of(conn, child["id"])
        budget = budget_of(conn, parent_id)
        budget["spentByChildren"] = budget.get("spentByChildren", 0) + subtree_spent(child_budget, child)
        if budget.get("reserved"):
            budget["reserved"] = max(0, budget["reserved"] - child_budget.get("tokens", 0))
        _set_budget(conn, parent_id, budget)
        if (child_input(conn, child["id"]) or {}).get("detached"):
            continue   # delegate {await: false}: charged to its parent, answered to nobody
        payload: dict = {"type": "tool_result", "toolCallId": call_id, "name": "delegate", "output": answer,
                         "actor": "agent", "meta": {"runId": parent_id}}
        # (A child that failed or was canceled is still an answer: its status and error are in
        # the output, which the model reads whole; the call itself did not fail.)
        try:
            event, body = events_q.append_event(conn, parent["sessionId"], payload, new_id(), now)
        except NotFound:
            continue   # the parent's session was deleted
        out.appends.append((parent["sessionId"], event, body))
        try:
            entry = journal_q.append(conn, parent_id, {"kind": "result", "tool": "delegate", "toolCallId": call_id,
                                                       "output": answer}, now)
            out.journal.append((parent, entry))
        except journal_q.JournalFull:
            pass   # the parent fails journal-cap at its next step; the session event stands
        woke = parking.child_ended(conn, child, now)
        if woke is not None:
            moved, resolution = woke
            out.runs.append(moved)
            if moved["status"] == "queued":
                out.woken.append(moved)
            if resolution is not None:
                out.journal.append((moved, resolution))
    return out


def cancel_subtrees(conn, runs: list[dict], now: int, new_id, ended=None) -> tuple[list[dict], Settled]:  # noqa: ANN001
    """Cancel `runs` and every live descendant of each; the parents that live on learn of their
    canceled children. `ended(conn, run) -> [publish, ...]` (the runtime's run-end hook, if any)
    is told of each canceled run that no turn was running: a queued or parked run ends here, and
    nothing else would tell it (a running one's turn does, when it stops). Returns (the runs
    this call canceled, what it settled)."""
    targets: dict[str, dict] = {}
    for run in runs:
        targets.setdefault(run["id"], run)
        tree = runs_q.runs_of_tree(conn, run["rootRunId"], None, MAX_TREE)
        for below in runs_q.descendants(tree, run["id"]):
            targets.setdefault(below["id"], below)
    had_turn = {run_id for run_id, run in targets.items() if run["status"] == "running"}
    canceled = runs_q.cancel_runs(conn, list(targets.values()), now)
    parking.end_waits(conn, [r["id"] for r in canceled])
    settled = children_ended(conn, canceled, now, new_id)
    for run in canceled:
        if run["id"] not in had_turn:   # a visitor's run that never ran: all its tokens back
            visitors_q.settle_run(conn, run["id"], 0)
    if ended is not None:
        for run in canceled:
            if run["id"] not in had_turn:
                settled.after.extend(ended(conn, run))
    sessions = sorted({r["sessionId"] for r in canceled if "sessionId" in r}
                      | {s for s, _, _ in settled.appends})
    for session_id in sessions:
        try:
            settled.sessions.append(sessions_q.set_session_status(
                conn, session_id, runs_q.session_status_from_runs(conn, session_id), now))
        except NotFound:
            pass
    return canceled, settled

"""The agent's checklist (the plan verb) and what a run owes when it ends, as the reference keeps
them (`agents/src/api-service.ts`: normalizeRunPlan, the settle stamp, planStateBlock, the
continuation prompt and the unmet-obligations notice). Pure: the clock is an argument.

A plan is session state, not conversation: each step has a stable id, a label the model
rewrites freely and a status. `ownerRunId` and `resolvedBy` are runtime marks a model cannot
forge (only what the model may say is read from its input); `settledAt` dates the moment every
step became terminal, cleared when a step reopens.
"""
from __future__ import annotations

STEP_STATUSES = ("pending", "running", "done", "failed", "skipped")
TERMINAL_STEP = ("done", "failed", "skipped")
MAX_STEPS = 100
MAX_LABEL = 500

CONTINUATION_MARK = "This turn is ending with work you committed to still open"
NOTICE_MARK = "This run ended with work still open"


def normalize_plan(raw: dict) -> dict:
    """The plan a model wrote (already checked against the verb's schema), reduced to what the
    model may say: title and steps {id, label, status}."""
    steps = []
    seen = set()
    for step in (raw.get("steps") or [])[:MAX_STEPS]:
        step_id = str(step.get("id", ""))[:MAX_LABEL]
        if step_id in seen:
            continue   # ids are the step's identity: a repeated one is the same step
        seen.add(step_id)
        status = step.get("status") if step.get("status") in STEP_STATUSES else "pending"
        steps.append({"id": step_id, "label": str(step.get("label", ""))[:MAX_LABEL], "status": status})
    plan: dict = {"steps": steps}
    if isinstance(raw.get("title"), str) and raw["title"]:
        plan["title"] = raw["title"][:MAX_LABEL]
    return plan


def is_settled(plan: dict | None) -> bool:
    steps = (plan or {}).get("steps") or []
    return bool(steps) and all(s["status"] in TERMINAL_STEP for s in steps)


def next_plan(previous: dict | None, written: dict, run_id: str, now: int) -> dict:
    """The stored plan after the model wrote `written` (normalized) during run `run_id`."""
    plan = {**written, "ownerRunId": run_id}
    if previous and previous.get("steps"):
        # A step the runtime closed keeps its mark while it stays done.
        closed = {s["id"] for s in previous["steps"] if s.get("resolvedBy") == "runtime" and s["status"] == "done"}
        if closed:
            plan["steps"] = [{**s, "resolvedBy": "runtime"} if s["status"] == "done" and s["id"] in closed else s
                             for s in plan["steps"]]
        # A finished checklist only rewritten (same step ids, still settled) keeps its owner.
        if (previous.get("ownerRunId") and is_settled(previous) and is_settled(plan)
                and [s["id"] for s in previous["steps"]] == [s["id"] for s in plan["steps"]]):
            plan["ownerRunId"] = previous["ownerRunId"]
    if not is_settled(plan):
        plan.pop("settledAt", None)
        return plan
    if (previous and previous.get("settledAt") is not None and is_settled(previous)
            and previous.get("ownerRunId") == plan["ownerRunId"]):
        plan["settledAt"] = previous["settledAt"]
    else:
        plan["settledAt"] = now
    return plan


def running_step(plan: dict | None) -> dict | None:
    """{id, label} of the one step in progress, the step a child spawned now works on; None when
    no step or several run (which one a child serves is then unknown, as the reference has it)."""
    running = [s for s in (plan or {}).get("steps") or [] if s["status"] == "running"]
    return {"id": running[0]["id"], "label": running[0]["label"]} if len(running) == 1 else None


def open_steps(plan: dict | None, run_id: str) -> list[str]:
    """Labels of the steps still open on a plan owned by `run_id` (what the run owes)."""
    if not plan or plan.get("ownerRunId") != run_id:
        return []
    return [s["label"] for s in plan.get("steps") or [] if s["status"] not in TERMINAL_STEP]


def _escape(text: str) -> str:
    # Model-written text handed back inside a frame whose syntax it knows: no closing tag.
    return text.replace("<", "‹").replace(">", "›")


def plan_state_block(plan: dict | None) -> str | None:
    """The live checklist as the model sees it each step (never stored as an event)."""
    steps = (plan or {}).get("steps") or []
    if not steps:
        return None
    lines = [f"{_escape(s['id'])} · {_escape(s['label'])} · {s['status']}" for s in steps]
    return "\n".join(["<plan_state>", *lines, "",
                      "This is your live checklist; update statuses with the plan verb as you complete "
                      "work — before you finish your reply.", "</plan_state>"])


def continuation_prompt(open_labels: list[str]) -> str:
    return "\n".join([
        f"{CONTINUATION_MARK}:",
        f"- Your plan has unfinished steps: {', '.join(open_labels)}. Continue that work now, or set every "
        "step to an honest terminal status — done, failed, or skipped.",
        "",
        "Finish it now, or say plainly why you are stopping and close it out honestly. Don't leave the "
        "record claiming something you did not do.",
    ])


def unmet_notice(open_labels: list[str]) -> str:
    return "\n".join([
        f"{NOTICE_MARK}:",
        f"- Unfinished plan steps: {', '.join(open_labels)}.",
        "",
        "Nothing was completed on the agent’s behalf — the record shows the work exactly as it was left.",
    ])

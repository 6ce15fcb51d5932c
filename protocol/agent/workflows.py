"""Script children (workflows) as values: the source checks made when a script is submitted, the
content key a journaled effect is matched by on replay, and the plan a workflow's steps draw, as
the reference's `agents/src/workflow-host.ts` has them. Pure: no engine, no store, no clock.

A workflow is one module, `export default async function (input, ctx) {...}`, run in an embedded
JavaScript engine with no ambient authority (server/sandbox/workflow_vm.py); every effect goes
through `ctx` and is journaled. Resume is replay from the top: an effect whose content key has a
journaled group gets that group's recorded result, whatever order the effects come in (after
`ctx.parallel` the order of continuations follows real completion times).
"""
from __future__ import annotations

import json
import re

from .plans import STEP_STATUSES

SOURCE_MAX_BYTES = 256 * 1024
INPUT_MAX_BYTES = 256 * 1024
DEFAULT_ANSWER_SIGNAL = "answer"
# The journal kinds a workflow writes (RunJournalEntry): call/result, timer/fired, wait/event,
# now, log, step, plan, and the successor a continueAsNew started.
KINDS = ("call", "result", "timer", "fired", "wait", "event", "now", "log", "step", "plan", "continued")
LOG_LEVELS = ("debug", "info", "warn", "error")

_BANNED = (
    (re.compile(r"\bMath\.random\b"), "Math.random is not available: take randomness as workflow input"),
    (re.compile(r"\bDate\b"), "Date is not available: use `await ctx.now()` for the current time"),
    (re.compile(r"\bsetTimeout\b|\bsetInterval\b"),
     "timers are not available: use `await ctx.sleep(ms)` (durable, survives restarts)"),
    (re.compile(r"\bfetch\s*\("), 'fetch is not available: use `await ctx.call("read", {address: url})`'),
    (re.compile(r"\bXMLHttpRequest\b"), "XMLHttpRequest is not available: use ctx.call with the read verb"),
    (re.compile(r"\beval\s*\("), "eval is not available in workflows"),
    (re.compile(r"\brequire\s*\("), "require is not available: workflows have no imports; everything comes from ctx"),
    (re.compile(r"\bimport\s*\(|^\s*import\s", re.M),
     "imports are not available: workflows are single self-contained modules"),
    (re.compile(r"\bprocess\."), "process is not available in workflows"),
    (re.compile(r"\bglobalThis\b"), "globalThis access is not allowed in workflows"),
)
_EXPORT = re.compile(r"export\s+default")


def lint(source: str) -> list[str]:
    """What is wrong with a submitted script, in sentences the model can act on (empty: fine).
    The engine removes the same things at run time; failing here turns a replay stall at 2 am
    into a tool error in the same turn."""
    problems = []
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > SOURCE_MAX_BYTES:
        problems.append(f"the script is {size} bytes; the limit is {SOURCE_MAX_BYTES}")
    for pattern, message in _BANNED:
        if pattern.search(source):
            problems.append(message)
    if len(_EXPORT.findall(source)) != 1:
        problems.append("the module must have exactly one `export default async function (input, ctx) { ... }`")
    return problems


def transform(source: str) -> str:
    """The one `export default` as a global the host's kickoff calls (line numbers unchanged, so
    a stack's `workflow.js:LINE` points into the stored source)."""
    return _EXPORT.sub("__workflow_main =", source, count=1)


def _canon(value) -> str:  # noqa: ANN001
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def effect_key(op: str, args: dict) -> str:
    """The deterministic content key of one ctx effect: what replay matches a journaled group by.
    A call's description (display only) stays out of it, so relabelling never breaks a replay."""
    if op == "tool":
        return f"tool|{args.get('tool', '')}|{_canon(args.get('input'))}"
    if op == "agent":
        return f"agent|{_canon(args.get('spec'))}"
    if op == "sleep":
        return f"sleep|{sleep_ms(args.get('ms'))}"
    if op == "wait":
        return f"wait|{_canon(args.get('match'))}"
    if op == "log":
        return f"log|{args.get('level', '')}|{args.get('message', '')}"
    if op == "step":
        return f"step|{args.get('stepId', '')}|{args.get('phase', '')}"
    if op == "plan":
        return f"plan|{_canon(args.get('plan'))}"
    return op   # now, continueAsNew


def sleep_ms(value) -> int:  # noqa: ANN001
    try:
        ms = int(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, ms)


def answer_signal_for(match) -> str | None:  # noqa: ANN001
    """The signal name that would answer a wait, when a signal can: a wait naming one takes that
    name, a wait with no criteria takes any (answered with DEFAULT_ANSWER_SIGNAL), a wait on the
    activity feed none (the reference's `answerSignalFor`)."""
    if not isinstance(match, dict):
        return DEFAULT_ANSWER_SIGNAL
    signal = match.get("signal")
    if isinstance(signal, str) and signal:
        return signal
    if signal is not None:
        return None
    if any(match.get(k) is not None for k in ("eventType", "resource", "author")):
        return None
    return DEFAULT_ANSWER_SIGNAL


ACTIVITY_CRITERIA = ("eventType", "resource", "author")


def watches_activity(match) -> bool:  # noqa: ANN001
    """A wait the activity feed can answer: criteria of the feed, and no signal named."""
    return isinstance(match, dict) and match.get("signal") is None and \
        any(isinstance(match.get(k), str) for k in ACTIVITY_CRITERIA)


def normalize_plan(raw) -> dict:  # noqa: ANN001
    """A script's `ctx.plan(...)`, bounded: bare strings are pending steps (models write them)."""
    if not isinstance(raw, dict):
        return {"steps": []}
    steps = []
    for index, step in enumerate((raw.get("steps") if isinstance(raw.get("steps"), list) else [])[:100]):
        if isinstance(step, str):
            step = {"label": step}
        if not isinstance(step, dict):
            continue
        status = step.get("status") if step.get("status") in STEP_STATUSES else "pending"
        steps.append({"id": step["id"][:200] if isinstance(step.get("id"), str) and step["id"] else f"step-{index + 1}",
                      "label": step["label"][:200] if isinstance(step.get("label"), str) else f"Step {index + 1}",
                      "status": status})
    plan: dict = {"steps": steps}
    if isinstance(raw.get("title"), str) and raw["title"]:
        plan["title"] = raw["title"][:200]
    return plan


def apply_step(plan: dict, step_id: str, label: str, phase: str, ok: bool | None) -> dict:
    """The plan after a `ctx.step` starts or ends: a declared step of that label (pending or
    running) is the one it moves, else the step is added (the reference's applyStepToPlan)."""
    steps = [dict(s) for s in plan.get("steps", [])]
    existing = next((s for s in steps if s["id"] == step_id), None) or next(
        (s for s in steps if s["label"] == label and s["status"] in ("pending", "running")), None)
    if phase == "start":
        if existing is not None:
            existing["status"] = "running"
        else:
            steps.append({"id": step_id, "label": label[:200], "status": "running"})
    elif existing is not None:
        existing["status"] = "failed" if ok is False else "done"
    return {**plan, "steps": steps}

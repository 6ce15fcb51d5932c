"""The delegate verb and the hidden return_result, as the reference's tool-registry.ts has them.

`delegate` (a model child): the brief becomes the child session's first message verbatim; with
`output` (a JSON schema, root type object) the child is typed and answers through
`return_result`, checked against that schema. The call parks the turn: every delegate call of a
reply becomes a child when the turn parks (server/runtime/parked.py, one transaction), and the
turn resumes once all of them have ended, each call answered with its child's
{status, sessionId, runId, output?, error?}.

`agentId` runs one of the account's other agents as the child (under that agent's definition
and grants, never the caller's; an agent of another account is "not there", checked when the
child is spawned); `prompt` gives the child an anonymous persona (its system prompt, in place of
the agent's); at most one of the two. A bare `prompt` with no brief is read as the brief (the
reference's rescue: models often put the task there).

Limits as the reference: a child is at most 3 levels below its root, a session has at most 10
children; a call past either is answered at once with an error the model can act on (and the
parking transaction checks again). `await: false` (`detach`) starts a detached child at once: a
session of this agent under this run, whose answer nobody waits for; the turn goes on. A script
child (`script`, with `input`) is a workflow: its source is checked here (protocol/agent/workflows.py
`lint`), and it runs in the workflow engine (server/runtime/workflows.py) in a session of its own,
its answer the script's return value.

`wait` (a callable of this server, through `call`): the turn parks until a `SignalRun` names the
signal (any signal when none is named) or the timeout passes; the call is answered with what woke
it ({delivered, signal?, payload?} or {delivered: false, timedOut: true}). One wait per turn, and
not in a reply that also delegates.

`return_result` (a typed child only): a payload that does not fit the schema is answered with the
schema's complaints so the child can fix it, at most MAX_RESULT_ATTEMPTS times; a fitting one
ends the child's turn with that result.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from seed_agents.protocol.agent import thoroughness
from seed_agents.protocol.agent import workflows
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.tool_documents import check_schema, schema_errors

from ..store import delegation as delegation_q
from ..store import runs as runs_q
from ..store import turns as turns_q
from ..store.errors import Refused
from .context import Park, ToolFailure, ToolResult


@dataclass(slots=True)
class Delegation:
    """One delegate call of a turn, to become a child when the turn parks (what this tool hands
    the runtime, server/runtime/parked.py)."""

    tool_call_id: str
    title: str
    brief: str
    spec: dict          # stored as the child run's input: {brief, title, output?, tools?, agentId?, prompt?}
    #                     (a script child's: {title, input?, tools?}, its source kept on the run)
    script: str | None = None


MAX_RESULT_ATTEMPTS = 3
MAX_BRIEF_CHARS = 100_000


class Delegating:
    """One turn's delegation state, kept on its tool surface."""

    def __init__(self, depth: int, children: int, result_schema: dict | None,
                 preset: thoroughness.Preset = thoroughness.PRESETS[thoroughness.DEFAULT]) -> None:
        self.depth = depth                  # the run's depth in its tree
        self.children = children            # children the session has already
        self.preset = preset                # the session's thoroughness: its delegation limits and guidance
        self.calls: list[Delegation] = []   # this turn's delegate calls, in order
        self.result_schema = result_schema  # a typed child's output schema
        self.result: dict | None = None     # the accepted return_result payload
        self.bad_results = 0
        self.finished = False               # the turn ends now (a result was accepted, or refused for good)
        self.wait: dict | None = None       # this turn's wait: {toolCallId, signal?, label?, timeoutMs?}

    def restore(self, entries, run_id: str) -> None:  # noqa: ANN001
        """A run taken up again (after a crash) keeps what its earlier attempt recorded: an
        accepted return_result (its input, in the session's history) is the result."""
        accepted = {e.call_id for e in entries if e.role == "tool" and e.name == "return_result" and not e.is_error}
        for e in entries:
            if e.role == "tool_call" and e.name == "return_result" and e.run_id == run_id and e.call_id in accepted:
                try:
                    self.result, self.finished = json.loads(e.content), True
                except ValueError:
                    pass


def offered(name: str, description: str, parameters: dict) -> tuple[str, str, dict]:
    """The delegate verb as this server offers it: every mode of the reference's (a model child
    with a brief, as itself, a persona or another agent; a script child; a detached child)."""
    return name, description, parameters


def script_child(state: Delegating, call_id: str, params: dict) -> ToolResult:
    """delegate {script, input?, title?, tools?}: a workflow child, checked before anything runs."""
    script = params.get("script")
    if params.get("brief") is not None or params.get("prompt") is not None:
        raise ToolFailure("give exactly one of brief (a model child) or script (a script child)")
    for field in ("agentId", "output"):
        if params.get(field) is not None:
            raise ToolFailure(f"a script child does not take `{field}`: its result is what the script returns; "
                              "use ctx.delegate inside the script for model children")
    if type(script) is not str or not script.strip():
        raise ToolFailure("script must be the module's source: export default async function (input, ctx) {...}")
    problems = workflows.lint(script)
    if problems:
        raise ToolFailure("the script was not started: " + "; ".join(problems))
    value = params.get("input")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        raise ToolFailure("input must be a JSON value") from None
    if size > workflows.INPUT_MAX_BYTES:
        raise ToolFailure(f"input is {size} bytes as JSON; the limit is {workflows.INPUT_MAX_BYTES}")
    _check_room(state)
    title = params.get("title")
    title = (title.strip() if type(title) is str and title.strip() else "Script").splitlines()[0][:120]
    spec: dict = {"title": title, "input": value}
    tools = params.get("tools")
    if type(tools) is list and all(type(t) is str for t in tools):
        spec["tools"] = tools[:64]
    brief = f"Script child: {title}"
    if value is not None:
        brief += "\n\nInput:\n```json\n" + json.dumps(value, ensure_ascii=False, indent=1)[:20_000] + "\n```"
    state.calls.append(Delegation(call_id, title, brief, spec, script=script))
    return ToolResult(park=Park("children", {"toolCallId": call_id}))


def _check_room(state: Delegating) -> None:
    if state.wait is not None:
        raise ToolFailure("this reply already waits for a signal; delegate in another reply")
    check_depth(state)
    if state.children + len(state.calls) >= max_children(state):
        raise ToolFailure(f"a session has at most {max_children(state)} children{_under(state)}; do the rest "
                          "yourself")


def delegate(state: Delegating, call_id: str, params: dict) -> ToolResult:
    if params.get("script") is not None:
        return script_child(state, call_id, params)
    if params.get("input") is not None:
        raise ToolFailure("`input` is for a script child (with `script`); a model child takes a brief")
    brief, prompt, agent_id = params.get("brief"), params.get("prompt"), params.get("agentId")
    if brief is None and type(prompt) is str and prompt.strip():
        brief, prompt = prompt, None   # the task written into `prompt`: it is the brief
    if prompt is not None and agent_id is not None:
        raise ToolFailure("give either prompt (an anonymous worker) or agentId (another of your agents), not both")
    if prompt is not None and (type(prompt) is not str or not prompt.strip() or len(prompt) > MAX_BRIEF_CHARS):
        raise ToolFailure(f"prompt must be the child's system prompt, text of 1 to {MAX_BRIEF_CHARS} characters")
    if agent_id is not None and (type(agent_id) is not str or not 0 < len(agent_id) <= 200):
        raise ToolFailure("agentId must be the id of one of your agents")
    if type(brief) is not str or not brief.strip():
        raise ToolFailure("delegate needs a brief: the child's first message, with everything it needs to know")
    if len(brief) > MAX_BRIEF_CHARS:
        raise ToolFailure(f"the brief is longer than {MAX_BRIEF_CHARS} characters; give the child less, or "
                          "write the material to memory and point to it")
    _check_room(state)
    spec: dict = {"brief": brief}
    if prompt is not None:
        spec["prompt"] = prompt
    if agent_id is not None:
        spec["agentId"] = agent_id
    output = params.get("output")
    if output is not None:
        try:
            check_schema(output, "output")
        except (ProtocolError, Refused) as exc:
            raise ToolFailure(exc.message) from None
        if output.get("type") != "object":
            raise ToolFailure('output must be a JSON schema whose root type is "object"')
        spec["output"] = output
    title = params.get("title")
    if type(title) is not str or not title.strip():
        title = brief.strip().splitlines()[0]
    title = title.strip()[:120]
    spec["title"] = title
    tools = params.get("tools")
    if type(tools) is list and all(type(t) is str for t in tools):
        spec["tools"] = tools[:64]
    state.calls.append(Delegation(call_id, title, brief, spec))
    return ToolResult(park=Park("children", {"toolCallId": call_id}))


def max_children(state: Delegating) -> int:
    return min(state.preset.max_children, delegation_q.MAX_CHILDREN_PER_SESSION)


def _under(state: Delegating) -> str:
    narrower = state.preset.max_children < delegation_q.MAX_CHILDREN_PER_SESSION \
        or state.preset.max_depth < delegation_q.MAX_DEPTH
    return f" (this conversation is set to {state.preset.name})" if narrower else ""


def check_depth(state: Delegating) -> None:
    """A child one level below this run fits the tree's depth: the server's, or the preset's."""
    deepest = min(state.preset.max_depth, delegation_q.MAX_DEPTH)
    if state.depth + 1 > deepest:
        raise ToolFailure(f"delegation is at most {deepest} levels deep{_under(state)} and this run is at "
                          f"level {state.depth}; do this work yourself")


DETACHED_FIELDS = ("agentId", "prompt", "output", "tools", "script", "input")
# Every mode the verb runs here, as the access matrix names them (tests/access_table.py has rows
# for each): a child as the caller, as another agent of the account, as a persona, detached, and
# a script child (a workflow).
MODES = ("brief", "agentId", "prompt", "await:false", "script")


async def detach(state: Delegating, ctx, call_id: str, params: dict) -> ToolResult:  # noqa: ANN001
    """delegate {await: false}: a child session of this agent, started now under this run (in its
    tree: the runs card shows it, a cancel reaches it, its use is charged to this run), whose
    answer nobody waits for; the call is answered {status: detached, sessionId, runId, title}.
    It takes a share of the run's token budget as an awaited child does (half of what is left:
    the turn goes on). A retried call finds the child its first attempt started."""
    for field in DETACHED_FIELDS:
        if params.get(field) is not None:
            raise ToolFailure(f"delegate with await: false does not take `{field}`: a detached child runs as you "
                              f"and returns nothing; await the child, or drop {field}")
    brief = params.get("brief")
    if type(brief) is not str or not brief.strip():
        raise ToolFailure("delegate needs a brief: the child's first message, with everything it needs to know")
    if len(brief) > MAX_BRIEF_CHARS:
        raise ToolFailure(f"the brief is longer than {MAX_BRIEF_CHARS} characters; give the child less, or "
                          "write the material to memory and point to it")
    check_depth(state)
    if ctx.started is None:
        raise ToolFailure("detached children are started only from a model's turn")
    title = params.get("title")
    title = (title if type(title) is str and title.strip() else brief.strip().splitlines()[0]).strip()[:120]
    spec = {"brief": brief, "title": title, "detached": True}
    now = ctx.now_ms()
    limits = turns_q.TurnLimits.from_config(ctx.config)

    def job(conn):
        row = runs_q.child_of_call(conn, ctx.run_id, call_id)
        if row is not None:
            return {"runId": row[0], "sessionId": row[1]}, None
        parent = runs_q.get_run(conn, ctx.run_id)
        if parent is None or parent["status"] in runs_q.TERMINAL:
            raise ToolFailure("this run has ended; nothing was started")
        if delegation_q.child_count(conn, ctx.session_id) + len(state.calls) >= max_children(state):
            raise ToolFailure(f"a session has at most {max_children(state)} children{_under(state)}; do the "
                              "rest yourself")
        left = delegation_q.tokens_left(delegation_q.budget_of(conn, parent["id"]), parent,
                                        ctx.config.max_run_tokens)
        share = left // 2
        if share < delegation_q.MIN_CHILD_TOKENS:
            raise ToolFailure(f"this run has {left} tokens left of its token budget (--max-run-tokens), too few to "
                              f"give a child its share (at least {delegation_q.MIN_CHILD_TOKENS}); do this work "
                              "yourself, or finish")
        try:
            child = delegation_q.spawn_child(
                conn, parent, ctx.session_id, child_session_id=new_id(), child_run_id=new_id(),
                tool_call_id=call_id, title=title, brief=brief, spec=spec, now=now,
                event_ids=(new_id(), new_id()), budget={"tokens": share}, limits=limits)
        except (ProtocolError, Refused) as exc:   # the account's runs in flight, the tree's size
            raise ToolFailure(exc.message) from None
        delegation_q.reserve(conn, parent["id"], share)
        return {"runId": child.run["id"], "sessionId": child.session["id"]}, child.effects

    def new_id() -> str:   # (row ids as server/clock.py makes them; tools do not import it)
        return str(uuid.uuid4())

    ids, effects = await ctx.db.write(job)
    if effects is not None:
        ctx.started(effects)
    return ToolResult({"status": "detached", **ids, "title": title,
                       "summary": f"Started detached child \"{title}\"; it is now running in the background."})


MAX_WAIT_MS = 7 * 24 * 3600 * 1000
WAIT_DESCRIPTION = ("wait — park this run until someone answers it with a signal (SignalRun, a trigger) or until "
                    "timeoutMs passes; input {signal?, label?, timeoutMs?}; the call's result says what arrived")


def wait(state: Delegating, call_id: str, value: object) -> ToolResult:
    params = value if isinstance(value, dict) else {}
    if state.calls or state.wait is not None:
        raise ToolFailure("wait cannot share a reply with delegate calls or another wait; call it alone")
    signal, label, timeout = params.get("signal"), params.get("label"), params.get("timeoutMs")
    if signal is not None and (type(signal) is not str or not 0 < len(signal) <= 200):
        raise ToolFailure("signal must be a name of at most 200 characters")
    if label is not None and (type(label) is not str or len(label) > 200):
        raise ToolFailure("label must be text of at most 200 characters")
    if timeout is not None and (type(timeout) is not int or not 0 < timeout <= MAX_WAIT_MS):
        raise ToolFailure(f"timeoutMs must be a whole number of milliseconds from 1 to {MAX_WAIT_MS}")
    state.wait = {"toolCallId": call_id, **{k: v for k, v in (("signal", signal), ("label", label),
                                                               ("timeoutMs", timeout)) if v is not None}}
    return ToolResult(park=Park("event", {"toolCallId": call_id}))


def event_wait(spec: dict, now: int) -> tuple[dict, dict]:
    """(the stored RunWait, what answers it) of a turn's wait."""
    wait = {"reason": "event", "waitId": spec["toolCallId"], "toolCallId": spec["toolCallId"],
            "answerWith": spec.get("signal") or "continue"}
    if spec.get("label"):
        wait["label"] = spec["label"]
    if spec.get("timeoutMs"):
        wait["timeoutAt"] = now + spec["timeoutMs"]
    return wait, ({"signal": spec["signal"]} if spec.get("signal") else {})


def return_result(state: Delegating, params: dict) -> ToolResult:
    if state.result_schema is None:
        raise ToolFailure("return_result is only for a delegated task that declared an output schema")
    if state.finished:
        raise ToolFailure("a result was already delivered; this task is over")
    problems = schema_errors(state.result_schema, params)
    if not problems:
        state.result, state.finished = params, True
        return ToolResult({"accepted": True})
    state.bad_results += 1
    if state.bad_results >= MAX_RESULT_ATTEMPTS:
        state.finished = True
        raise ToolFailure(f"the result did not fit the required schema {state.bad_results} times; the task ends "
                          "without a result: " + "; ".join(problems))
    raise ToolFailure("the result does not fit the required schema; fix it and call return_result again ("
                      f"{MAX_RESULT_ATTEMPTS - state.bad_results} tries left): " + "; ".join(problems))

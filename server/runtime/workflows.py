"""Running a workflow: a script child's run, in the engine of server/sandbox/workflow_vm.py, every
effect of its `ctx` journaled (server/store/journal.py) and, on every start of the run, replayed.

A run starts from the top each time it is taken up (its first start, a wake from parking, the
start after a crash). Each effect the script asks for is filed under its content key
(protocol/agent/workflows.py `effect_key`); a journaled group with that key answers it with what was
recorded, in whatever order the effects come. An effect with no journaled group, asked while
groups are still unclaimed, is held: only once the script waits on nothing but held effects is
it decided; if groups are still unclaimed then, the script no longer does what it did, and the
run fails `nondeterministic-replay` (naming the first effect it did not ask for again) before
anything new is journaled or run.

Effects: `ctx.call` (a tool, as the workflow's agent narrowed like any child: Entry "workflow",
server/runtime/tool_context.py; each call is a `tool_call`/`tool_result` pair in the run's own
session, as a trigger's headless call is), `ctx.delegate` (a child run under this one, answered
in the journal by the child's ending, server/store/delegation.py), `ctx.sleep` (held in memory
below `--workflow-park-after-ms`, else the run parks on the clock), `ctx.waitForEvent` (the run
parks; SignalRun, a trigger's wake or its timeout answers it), `ctx.now`, `ctx.log`, `ctx.step`,
`ctx.plan` (the run's plan, published), `ctx.progress` (a live `appendPartial` on the run tree's
key, never stored) and `ctx.continueAsNew` (the run ends and a successor in its place carries
the state).

Exactly once: a side-effecting call journaled without its result (the server died while it ran)
is answered `interrupted`, never run again; a read-only one runs again. A child spawned before a
crash is found by its call entry, never spawned twice. A parked run holds nothing: it is a row.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

from seed_agents.protocol.agent import workflows as wf
from seed_agents.protocol.wire.errors import ProtocolError

from ..providers.base import ToolCall
from ..sandbox.workflow_vm import VMError, WorkflowVM
from ..store import agents as agents_q
from ..store import delegation as delegation_q
from ..store import events as events_q
from ..store import journal as journal_q
from ..store import parking
from ..store import runs as runs_q
from ..store.errors import Refused
from ..tools import records
from ..tools.context import ToolFailure, ToolResult
from ..tools.delegation_tools import Delegating, delegate
from ..tools.surface import OFFERED_VERBS, TURN_VERBS, ToolSurface, side_effects
from . import turns
from .tool_context import Entry, build_surface
from .tool_loop import TurnGone

log = logging.getLogger("seed_agents.runtime")

MAX_LOG_CHARS = 2_000
MAX_ENTRY_VALUE_BYTES = 256 * 1024   # one journaled value (a log's data, a tool's output) as JSON
MAX_PROGRESS_PER_SECOND = 10


# The engine's own errors, as a script's rejection carries them: the cap each one is.
ENGINE_FAULTS = {
    "out of memory": lambda config: ("memory-cap", f"the script used more than "
                                                   f"{config.workflow_memory_bytes // (1024 * 1024)} MiB of engine memory"),
    "interrupted": lambda config: ("fuel-exhausted", f"the script computed for more than {config.workflow_fuel_ms} ms "
                                                     "without awaiting a ctx call; move heavy computation to execute"),
    "Maximum call stack size exceeded": lambda config: ("stack-overflow", "the script recursed too deeply"),
    "stack overflow": lambda config: ("stack-overflow", "the script recursed too deeply"),
}


@dataclass
class Outcome:
    """How one execution of a workflow run ended."""

    status: str                        # succeeded | failed | parked | continued
    output: object = None
    error: dict | None = None          # {code, message, stack?, tool?, callSeq?}
    wait: dict | None = None           # parked: the RunWait
    match: dict | None = None          # parked on an event: what answers it
    state: object = None               # continued: the successor's input


class Replay:
    """A run's journal as replay needs it: groups of entries by callSeq, filed by content key,
    taken first come first served per key."""

    def __init__(self, infos: list[dict]) -> None:
        self.groups: dict[int, list[dict]] = {}
        by_call_id: dict[str, int] = {}
        loose = []
        for info in infos:
            entry = {**info["entry"], "_at": info["createdAt"]}
            seq = entry.get("callSeq")
            if isinstance(seq, int):
                self.groups.setdefault(seq, []).append(entry)
                if entry.get("kind") == "call" and entry.get("toolCallId"):
                    by_call_id[entry["toolCallId"]] = seq
            else:
                loose.append(entry)
        for entry in loose:   # a child's ending, journaled by the child (by its delegate call's id)
            seq = by_call_id.get(entry.get("toolCallId") or "")
            if entry.get("kind") == "result" and seq is not None:
                self.groups[seq].append(entry)
        self.by_key: dict[str, deque[int]] = {}
        for seq in sorted(self.groups):
            key = next((e["key"] for e in self.groups[seq] if isinstance(e.get("key"), str)), None)
            if key is not None:
                self.by_key.setdefault(key, deque()).append(seq)
        self.last_seq = max(self.groups, default=0)
        self.replaying = bool(self.by_key)

    def take(self, key: str) -> tuple[int, list[dict]] | None:
        queue = self.by_key.get(key)
        if not queue:
            return None
        seq = queue.popleft()
        return seq, self.groups[seq]

    def unclaimed(self) -> list[str]:
        return [key for key, queue in self.by_key.items() if queue]


def _find(group: list[dict] | None, kind: str, **match) -> dict | None:
    for entry in group or ():
        if entry.get("kind") == kind and all(entry.get(k) == v for k, v in match.items()):
            return entry
    return None


def _bounded(value, limit: int = MAX_ENTRY_VALUE_BYTES):  # noqa: ANN001, ANN202
    """A value to journal, or None when it is over the bound as JSON."""
    try:
        return value if len(json.dumps(value, ensure_ascii=False)) <= limit else None
    except (TypeError, ValueError):
        return None


def as_call(tool: str, tool_input) -> tuple[str, dict]:  # noqa: ANN001
    """(verb, its input): a callable tool goes through the `call` verb, as a model calls it."""
    if tool in OFFERED_VERBS or tool in TURN_VERBS or tool == "return_result":
        return tool, tool_input if isinstance(tool_input, dict) else {}
    return "call", {"tool": tool, "input": tool_input if isinstance(tool_input, dict) else {}}


@dataclass
class _Pending:
    children: dict[str, int] = field(default_factory=dict)          # toolCallId -> callId
    timers: list[tuple[int, int, int]] = field(default_factory=list)  # (wakeAt, callSeq, callId) parked
    event: dict | None = None                                         # the first open wait
    continue_state: tuple[bool, object] | None = None


class WorkflowRun:
    """One execution of a workflow run (its start, or a replay after a park or a crash)."""

    def __init__(self, rt, run: dict, agent: dict, worker) -> None:  # noqa: ANN001
        self.rt, self.run, self.agent, self.worker = rt, run, agent, worker
        self.db, self.config, self.pub = rt.db, rt.config, rt.publisher
        self.still_ours = rt.queue.still_ours(run)
        self.session_id = run["sessionId"]
        self.replay: Replay | None = None
        self.pending = _Pending()
        self.inflight: dict[asyncio.Task, int] = {}
        self.deliveries: list[tuple[int, bool, object]] = []
        self.held: list[tuple[int, str, object]] = []   # effects asked anew before the replay was done
        self.plan: dict = dict(run.get("plan") or {"steps": []})
        self.surface: ToolSurface | None = None
        self._progress_at = 0.0

    # -- the store -----------------------------------------------------------------------------
    async def _write(self, fn, *args):  # noqa: ANN001, ANN202
        """One transaction of this run's, only while the run is still this server's and running."""
        still_ours, gone, run_id = self.still_ours, self.worker, self.run["id"]

        def job(conn):
            if gone.gone:
                raise TurnGone("the session was deleted")
            if runs_q.status_of(conn, run_id) != "running" or (still_ours is not None and not still_ours(conn)):
                raise TurnGone("the run is no longer this server's")
            return fn(conn, *args)

        return await self.db.write(job)

    async def _journal(self, entries: list[dict], events: list[dict] = (), plan: bool = False) -> None:  # type: ignore[assignment]
        """Entries (and their session events, and the plan) in one transaction, then published."""
        if not entries and not events and not plan:
            return
        now, run_id, session_id, limit = self.rt.now_ms(), self.run["id"], self.session_id, self.config.max_event_bytes
        new_plan = self.plan

        def job(conn):
            written = [journal_q.append(conn, run_id, e, now) for e in entries]
            appended = [events_q.append_event(conn, session_id, p, str(uuid.uuid4()), now, limit) for p in events]
            run = runs_q.set_plan(conn, run_id, new_plan) if plan else None
            return written, appended, run

        written, appended, run = await self._write(job)
        for info in written:
            self.pub.publish_journal(self.run, info)
        for event, body in appended:
            self.pub.publish_append(session_id, event, body)
        if run is not None:
            self.run = {**self.run, "plan": run.get("plan")}
            self.pub.publish_run(runs_q.public(run))

    # -- the run -----------------------------------------------------------------------------
    async def execute(self) -> Outcome:
        run_id = self.run["id"]
        source = self.run.get("sourceText") or ""
        spec = self.db.read(delegation_q.child_input, run_id) or {}
        infos = self.db.read(journal_q.entries, run_id, 0, journal_q.MAX_ENTRIES + 1)
        self.replay = Replay(infos)
        vm = WorkflowVM(memory_bytes=self.config.workflow_memory_bytes, fuel_ms=self.config.workflow_fuel_ms)
        try:
            await vm.start(wf.transform(source), spec.get("input"), run_id)
            return await self._pump(vm)
        except VMError as exc:
            return Outcome("failed", error=exc.info())
        finally:
            for task in self.inflight:
                task.cancel()
            vm.close()

    async def _pump(self, vm: WorkflowVM) -> Outcome:
        live: list = []
        while True:
            for call_id in vm.oversized:
                self.deliveries.append((call_id, False, {"code": "too-large", "message": (
                    "the arguments of this ctx call are over 1 MiB as JSON; pass less, or keep it in memory "
                    "and pass its address")}))
            vm.oversized.clear()
            batch = vm.take_effects()
            if batch:
                entries, events, plan_changed, starts = await self._handle(batch)
                await self._journal(entries, events, plan_changed)
                live.extend(starts)
            self._progress(vm)
            if self.deliveries:
                deliveries, self.deliveries = self.deliveries, []
                await vm.deliver(deliveries)
                continue
            if self.held:   # the script waits on what it asked anew: the replay must be done
                unclaimed = self.replay.unclaimed()
                if unclaimed:
                    return self._diverged(unclaimed)
                held, self.held = self.held, []
                entries, events, plan_changed, starts = await self._handle(held)
                await self._journal(entries, events, plan_changed)
                live.extend(starts)
                continue
            if vm.finished is not None:
                return self._finished(vm.finished)
            unclaimed = self.replay.unclaimed()
            if unclaimed:
                return Outcome("failed", error={"code": "nondeterministic-replay", "message": (
                    "the script no longer does what its journal recorded: on replay it did not ask again for "
                    f"{unclaimed[0][:200]!r} (and {len(unclaimed) - 1} more); a run replays exactly the code it "
                    "started with, so the script depends on something outside ctx")})
            if live:
                starts, live = live, []
                for start in starts:
                    await start()
                if self.deliveries:
                    continue
            if self.pending.continue_state is not None and not self.inflight:
                return Outcome("continued", state=self.pending.continue_state[1])
            if self.inflight:
                done, _ = await asyncio.wait(list(self.inflight), return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    call_id = self.inflight.pop(task)
                    exc = task.exception()
                    if exc is not None:
                        raise exc
                    outcome = task.result()
                    if outcome is not None:
                        self.deliveries.append((call_id, *outcome))
                continue
            parked = self._park()
            if parked is not None:
                return parked
            return Outcome("failed", error={"code": "workflow-deadlock", "message": (
                "the script awaits something that can never settle (a promise outside ctx)")})

    @staticmethod
    def _diverged(unclaimed: list[str]) -> Outcome:
        return Outcome("failed", error={"code": "nondeterministic-replay", "message": (
            "the script no longer does what its journal recorded: on replay it asked for something new before "
            f"asking again for {unclaimed[0][:200]!r} (and {len(unclaimed) - 1} more); a run replays exactly the "
            "code it started with, so the script depends on something outside ctx; nothing new was run")})

    def _finished(self, finished: tuple[bool, object]) -> Outcome:
        ok, value = finished
        if ok:
            unclaimed = self.replay.unclaimed()
            if unclaimed:
                return Outcome("failed", error={"code": "nondeterministic-replay", "message": (
                    f"the script finished without asking again for {unclaimed[0][:200]!r}, which its journal "
                    "recorded; a run replays exactly the code it started with")})
            return Outcome("succeeded", output=value)
        error = value if isinstance(value, dict) else {}
        out = {"code": str(error.get("code") or "workflow-error")[:100],
               "message": str(error.get("message") or "the workflow failed")[:2000]}
        if out["code"] == "workflow-error" and out["message"] in ENGINE_FAULTS:
            # (a cap hit inside an async body reaches the host as the script's rejection)
            out["code"], out["message"] = ENGINE_FAULTS[out["message"]](self.config)
        for key in ("stack", "tool"):
            if isinstance(error.get(key), str):
                out[key] = error[key][:8000]
        if isinstance(error.get("callSeq"), int):
            out["callSeq"] = error["callSeq"]
        return Outcome("failed", error=out)

    def _park(self) -> Outcome | None:
        """Nothing to do here: park on the first open wait (its timeout pulled in by a parked
        sleep's), else on the children, else on the clock."""
        p = self.pending
        timer = min(p.timers) if p.timers else None
        if p.event is not None:
            wait = dict(p.event["wait"])
            if timer is not None and (wait.get("timeoutAt") is None or timer[0] < wait["timeoutAt"]):
                wait["timeoutAt"] = timer[0]
            return Outcome("parked", wait=wait, match=p.event["match"])
        if p.children:
            return Outcome("parked", wait={"reason": "children", "toolCallIds": sorted(p.children)})
        if timer is not None:
            return Outcome("parked", wait={"reason": "timer", "wakeAt": timer[0], "callSeq": timer[1]})
        return None

    def _progress(self, vm: WorkflowVM) -> None:
        if not vm.progress:
            return
        patch, vm.progress = vm.progress[-1], []
        now = time.monotonic()
        if now - self._progress_at < 1 / MAX_PROGRESS_PER_SECOND:
            return
        self._progress_at = now
        progress: dict = {}
        if isinstance(patch.get("fraction"), (int, float)) and not isinstance(patch["fraction"], bool):
            progress["fraction"] = min(1.0, max(0.0, float(patch["fraction"])))
        if isinstance(patch.get("label"), str):
            progress["label"] = patch["label"][:200]
        self.pub.publish_run_partial(self.run, {"progress": progress})

    # -- effects -----------------------------------------------------------------------------
    async def _handle(self, batch):  # noqa: ANN001, ANN202
        """Each effect answered from the journal, or made ready to run live (its journal entries
        and the functions that start it, after the replay check)."""
        entries: list[dict] = []
        events: list[dict] = []
        starts: list = []
        plan_changed = False
        spawns: list[tuple[int, int, str, dict, str | None]] = []
        now = self.rt.now_ms()
        for call_id, op, raw in batch:
            args = raw if isinstance(raw, dict) else {}
            key = wf.effect_key(op, args)
            taken = self.replay.take(key)
            if taken is None and self.replay.unclaimed():
                self.held.append((call_id, op, raw))   # new, while the replay is not done: not yet
                continue
            call_seq, group = taken if taken is not None else (self._next_seq(), None)

            def deliver(ok: bool, value, call_id=call_id) -> None:  # noqa: ANN001
                self.deliveries.append((call_id, ok, value))

            if op == "tool":
                tool = args.get("tool")
                result = _find(group, "result")
                if result is not None:
                    deliver(*self._result_value(result, tool))
                    continue
                if not isinstance(tool, str) or not tool:
                    deliver(False, {"code": "bad-call", "message": "ctx.call(tool, input): tool must be a name"})
                    continue
                verb, verb_input = as_call(tool, args.get("input"))
                description = (args.get("opts") or {}).get("description") if isinstance(args.get("opts"), dict) else None
                if group is not None:   # called before a crash, its result never recorded
                    if side_effects(verb, json.dumps(verb_input)):
                        error = {"code": "interrupted", "message": (
                            f"the server stopped while {tool} ran; it was not run again (it may or may not have "
                            "taken effect): check before calling it again")}
                        entries.append({"kind": "result", "callSeq": call_seq, "status": "failed", "error": error})
                        events.append({"type": "tool_result", "toolCallId": f"ctx-{call_seq}", "name": verb,
                                       "error": error["message"], "actor": "agent", "meta": {"runId": self.run["id"]}})
                        deliver(False, {**error, "tool": tool, "callSeq": call_seq})
                        continue
                else:
                    entry = {"kind": "call", "callSeq": call_seq, "key": key, "op": "tool", "tool": tool,
                             "input": _bounded(args.get("input"))}
                    if isinstance(description, str) and description:
                        entry["description"] = description[:200]
                    entries.append(entry)
                    events.append(records.call_event(f"ctx-{call_seq}", verb, verb_input, "agent",
                                                     {"runId": self.run["id"]}))
                starts.append(self._starter(call_id, call_seq, self._call_tool(call_seq, tool, verb, verb_input)))
            elif op == "agent":
                result = _find(group, "result")
                call = _find(group, "call")
                if result is not None:
                    deliver(True, result.get("output"))
                elif call is not None and call.get("toolCallId"):
                    self.pending.children[call["toolCallId"]] = call_id   # spawned before: its ending answers
                else:
                    spec = args.get("spec") if isinstance(args.get("spec"), dict) else {}
                    step = args.get("step") if isinstance(args.get("step"), str) else None
                    spawns.append((call_id, call_seq, key, spec, step))
            elif op == "sleep":
                ms = wf.sleep_ms(args.get("ms"))
                timer = _find(group, "timer")
                wake_at = timer["wakeAt"] if timer is not None else now + ms
                if timer is None:
                    entries.append({"kind": "timer", "callSeq": call_seq, "key": key, "wakeAt": wake_at})
                if _find(group, "fired") is not None:
                    deliver(True, None)
                elif wake_at <= now:
                    entries.append({"kind": "fired", "callSeq": call_seq, "key": key, "wakeAt": wake_at})
                    deliver(True, None)
                elif wake_at - now >= self.config.workflow_park_after_ms:
                    self.pending.timers.append((wake_at, call_seq, call_id))
                else:
                    self._hold_timer(call_id, call_seq, key, wake_at)
            elif op == "wait":
                match = args.get("match") if isinstance(args.get("match"), dict) else {}
                opts = args.get("opts") if isinstance(args.get("opts"), dict) else {}
                wait = _find(group, "wait")
                event = _find(group, "event")
                if wait is None:
                    timeout = opts.get("timeoutMs")
                    wait = {"kind": "wait", "callSeq": call_seq, "key": key, "waitId": str(uuid.uuid4()),
                            "match": _bounded(match, 16_384) or {}}
                    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
                        wait["timeoutAt"] = now + int(min(timeout, 10 * 365 * 86_400_000))
                    if isinstance(opts.get("label"), str) and opts["label"]:
                        wait["label"] = opts["label"][:200]
                    entries.append(wait)
                if event is not None and event.get("timedOut") and (
                        wait.get("timeoutAt") is None or event["_at"] < wait["timeoutAt"]):
                    event = None   # (the clock woke the run for a parked sleep, not for this wait)
                if event is not None:
                    deliver(True, event.get("delivery"))
                elif wait.get("timeoutAt") is not None and wait["timeoutAt"] <= now:
                    entries.append({"kind": "event", "callSeq": call_seq, "key": key, "waitId": wait["waitId"],
                                    "timedOut": True})
                    deliver(True, None)
                elif self.pending.event is None:
                    stored = {"reason": "event", "waitId": wait["waitId"], "callSeq": call_seq}
                    for k in ("timeoutAt", "label"):
                        if wait.get(k) is not None:
                            stored[k] = wait[k]
                    answer = wf.answer_signal_for(wait.get("match"))
                    if answer is not None:
                        stored["answerWith"] = answer
                    self.pending.event = {"wait": stored, "match": wait.get("match") or {}}
                # (a second open wait is registered when the first is answered: a run parks on one)
            elif op == "now":
                recorded = _find(group, "now")
                if recorded is None:
                    recorded = {"kind": "now", "callSeq": call_seq, "key": key, "value": now}
                    entries.append(recorded)
                deliver(True, recorded["value"])
            elif op == "log":
                if group is None:
                    level = args.get("level") if args.get("level") in wf.LOG_LEVELS else "info"
                    entry = {"kind": "log", "callSeq": call_seq, "key": key, "level": level,
                             "message": str(args.get("message") or "")[:MAX_LOG_CHARS]}
                    if args.get("data") is not None:
                        entry["data"] = _bounded(args["data"], 16_384)
                    entries.append(entry)
                deliver(True, None)
            elif op == "step":
                phase = "end" if args.get("phase") == "end" else "start"
                entry = {"kind": "step", "callSeq": call_seq, "key": key, "stepId": str(args.get("stepId") or "")[:100],
                         "label": str(args.get("label") or "")[:200], "phase": phase}
                if phase == "end":
                    entry["ok"] = args.get("ok") is not False
                if group is None:
                    entries.append(entry)
                self.plan = wf.apply_step(self.plan, entry["stepId"], entry["label"], phase, entry.get("ok"))
                plan_changed = True
                deliver(True, None)
            elif op == "plan":
                plan = wf.normalize_plan(args.get("plan"))
                if group is None:
                    entries.append({"kind": "plan", "callSeq": call_seq, "key": key, "plan": plan})
                self.plan = plan
                plan_changed = True
                deliver(True, None)
            elif op == "continueAsNew":
                state = _bounded(args.get("state"), wf.INPUT_MAX_BYTES)
                if state is None and args.get("state") is not None:
                    deliver(False, {"code": "too-large", "message": "the state passed on is over 256 KiB as JSON"})
                else:
                    self.pending.continue_state = (True, state)
            else:
                deliver(False, {"code": "unknown-op", "message": f"unknown ctx operation {op[:50]!r}"})
        if spawns:
            entries.extend(await self._spawn(spawns))
        return entries, events, plan_changed and self._plan_moved(), starts

    def _plan_moved(self) -> bool:
        return self.plan != (self.run.get("plan") or {"steps": []})

    def _next_seq(self) -> int:
        self.replay.last_seq += 1
        return self.replay.last_seq

    @staticmethod
    def _result_value(entry: dict, tool) -> tuple[bool, object]:  # noqa: ANN001
        if entry.get("status") == "succeeded":
            return True, entry.get("output")
        error = dict(entry.get("error") or {"code": "tool-error", "message": "the call failed"})
        error["callSeq"] = entry.get("callSeq")
        if isinstance(tool, str):
            error["tool"] = tool
        return False, error

    def _starter(self, call_id: int, call_seq: int, coro):  # noqa: ANN001, ANN202
        async def start() -> None:
            self.inflight[asyncio.create_task(coro, name=f"workflow:{self.run['id']}:{call_seq}")] = call_id
        return start

    def _hold_timer(self, call_id: int, call_seq: int, key: str, wake_at: int) -> None:
        async def sleep() -> tuple[bool, object]:
            await asyncio.sleep(max(0.0, (wake_at - self.rt.now_ms()) / 1000))
            await self._journal([{"kind": "fired", "callSeq": call_seq, "key": key, "wakeAt": wake_at}])
            return True, None
        self.inflight[asyncio.create_task(sleep(), name=f"workflow:{self.run['id']}:{call_seq}")] = call_id

    async def _call_tool(self, call_seq: int, tool: str, verb: str, verb_input: dict) -> tuple[bool, object]:
        started = time.perf_counter()
        try:
            if verb in TURN_VERBS or verb == "return_result":   # a model turn's own verbs
                raise ToolFailure(f"{verb} is not offered here: a workflow's children come through ctx.delegate, "
                                  "its successor through ctx.continueAsNew, its result is what it returns")
            async with asyncio.timeout(self.config.tool_timeout):
                surface = self.surface
                if surface is None:
                    surface = self.surface = await build_surface(self.rt, Entry("workflow"), self.agent,
                                                                 self.session_id, self.run)
                result = await surface.run(ToolCall(f"ctx-{call_seq}", verb, json.dumps(verb_input)))
        except TimeoutError:
            result = ToolResult(error=f"the tool did not finish within {self.config.tool_timeout:g} s")
        except ToolFailure as exc:
            result = ToolResult(error=str(exc))
        if result.park is not None:
            result = ToolResult(error="this tool waits for something; in a workflow use ctx.waitForEvent")
        payload = records.result_event(f"ctx-{call_seq}", verb, result, "agent", self.config.max_tool_output_chars,
                                       {"runId": self.run["id"],
                                        "durationMs": int((time.perf_counter() - started) * 1000)})
        if result.error is not None:
            error = {"code": "tool-error", "message": result.error[:4000]}
            await self._journal([{"kind": "result", "callSeq": call_seq, "status": "failed", "error": error}], [payload])
            return False, {**error, "tool": tool, "callSeq": call_seq}
        output = payload.get("output")
        await self._journal([{"kind": "result", "callSeq": call_seq, "status": "succeeded", "output": output}],
                            [payload])
        return True, output

    async def _spawn(self, spawns) -> list[dict]:  # noqa: ANN001
        """ctx.delegate calls: checked as a delegate call is, then each a child run under this one
        (in one transaction with their call entries). A refused one is answered at once."""
        rt, run = self.rt, self.run
        depth = run["depth"]
        children = self.db.read(delegation_q.child_count, self.session_id)
        ready: list[tuple] = []
        for call_id, call_seq, key, spec, step in spawns:
            state = Delegating(depth, children + len(ready), None)
            try:
                delegate(state, f"ctx-{call_seq}", spec)
            except ToolFailure as exc:
                self.deliveries.append((call_id, False, {"code": "bad-delegate", "message": str(exc)}))
                continue
            ready.append((call_id, call_seq, key, state.calls[0], step))
        if not ready:
            return []
        now, limits, plan = rt.now_ms(), turns.TurnLimits.from_config(self.config), self.plan
        server_tokens = self.config.max_run_tokens

        def job(conn):
            current = parking.lock_run(conn, run["id"])
            left = delegation_q.tokens_left(delegation_q.budget_of(conn, run["id"]), current, server_tokens)
            share = left // (len(ready) + 1)
            effects, entries, refused, reserved = turns.Effects(), [], [], 0
            for call_id, call_seq, key, d, step in ready:
                refusal = None
                if d.spec.get("agentId") is not None and \
                        agents_q.agent_account(conn, d.spec["agentId"]) != current["account"]:
                    refusal = f"there is no agent {d.spec['agentId']} among your account's agents"
                elif share < delegation_q.MIN_CHILD_TOKENS:
                    refusal = (f"this run has {left} tokens left of its token budget, too few to give a child its "
                               f"share (at least {delegation_q.MIN_CHILD_TOKENS})")
                if refusal is None:
                    stamp = next((s for s in plan.get("steps", []) if s["label"] == step and s["status"] == "running"),
                                 None) if step else None
                    try:
                        child = delegation_q.spawn_child(
                            conn, current, self.session_id, child_session_id=str(uuid.uuid4()),
                            child_run_id=str(uuid.uuid4()), tool_call_id=d.tool_call_id, title=d.title,
                            brief=d.brief, spec=d.spec, now=now, event_ids=(str(uuid.uuid4()), str(uuid.uuid4())),
                            budget={"tokens": share}, limits=limits,
                            step={"id": stamp["id"], "label": stamp["label"]} if stamp else None, source=d.script)
                    except (ProtocolError, Refused) as exc:
                        refusal = exc.message
                if refusal is not None:
                    refused.append((call_id, refusal))
                    continue
                reserved += share
                effects.merge(child.effects)
                entries.append({"kind": "call", "callSeq": call_seq, "key": key, "op": "agent", "input": d.spec,
                                "toolCallId": d.tool_call_id, "childRunId": child.run["id"],
                                "sessionId": child.session["id"]})
            if reserved:
                delegation_q.reserve(conn, run["id"], reserved)
            return effects, entries, refused

        effects, entries, refused = await self._write(job)
        turns.publish(self.pub, rt.kick, effects)
        for call_id, refusal in refused:
            self.deliveries.append((call_id, False, {"code": "bad-delegate", "message": refusal}))
        by_call = {call_seq: call_id for call_id, call_seq, *_ in ready}
        for entry in entries:
            self.pending.children[entry["toolCallId"]] = by_call[entry["callSeq"]]
        return entries


async def continue_as_new(rt, run: dict, state, worker) -> dict | None:  # noqa: ANN001
    """ctx.continueAsNew: a successor run in this run's place (same parent, same delegate call,
    same session, its script and budget), carrying only `state`; this run lets go of the call so
    its ending answers nobody. The successor's RunInfo, or None (the run is not ours any more)."""
    now = rt.now_ms()
    still_ours = rt.queue.still_ours(run)
    successor_id = str(uuid.uuid4())

    def job(conn):
        if worker.gone:
            return None
        current = parking.lock_run(conn, run["id"])
        if current is None or current["status"] != "running" or (still_ours is not None and not still_ours(conn)):
            return None
        made = runs_q.successor_of(conn, run["id"])
        if made is not None:   # (made before a crash that came before this run's ending)
            return made, None
        parent = runs_q.get_run(conn, current["parentRunId"]) if "parentRunId" in current else None
        spec = dict(delegation_q.child_input(conn, run["id"]) or {})
        spec["input"] = state
        new = runs_q.create_run(conn, successor_id, current["account"], current["agentId"], run["sessionId"], None,
                                now, title=current["title"], origin=current["origin"], parent=parent)
        # (one run per delegate call: the predecessor lets go of it first)
        runs_q.hand_over_call(conn, run["id"], successor_id, current.get("parentToolCallId"), spec,
                              {k: v for k, v in delegation_q.budget_of(conn, run["id"]).items() if k == "tokens"})
        new = runs_q.make_workflow(conn, new, current["sourceText"], continued_from=run["id"])
        if current.get("parentToolCallId"):
            new["parentToolCallId"] = current["parentToolCallId"]
        entry = journal_q.append(conn, run["id"], {"kind": "continued", "runId": successor_id}, now)
        return new, entry

    done = await rt.db.write(job)
    if done is None:
        return None
    new, entry = done
    if entry is not None:
        rt.publisher.publish_journal(run, entry)
    rt.publisher.publish_run(runs_q.public(new))
    return new

"""A turn is a loop: the model answers or calls tools; the server runs the calls and feeds the
results back, until the model answers without calling anything, or a budget ends the run.

Strategy-blind: the same loop runs for a local queue and for a run claimed from a shared store
(the runner hands it its queue's `still_ours`, the lease check that guards every write on a shared
store; server/runtime/scheduling.py).

Durable, in this order for each step (docs/protocol.md "The tool loop"):
1. the model's step streams (text as `appendPartial` textDelta, `activity` patches around it);
2. one transaction records what the step said before its calls (an assistant message), every
   `tool_call` event of the step and the run's usage so far; when a call has side effects
   (`surface.side_effects`) it is committed before any call runs, else it is queued (the writer
   commits in order, so it lands before the results; a crash before it commits only means the
   model is asked for the step again);
3. each call runs, then one transaction records its `tool_result` with the call's id. It is
   queued before the next call or model step, and the writer commits in order, so it lands
   before anything the next step records (the loop does not wait for its fsync; the step's calls
   are waited for, since a call must be on disk before its tool runs). A crash between 2 and 3
   (or before 3 committed) leaves a call without a result: when the run
   is taken up again (requeued at start, or claimed by another server), `resume_open_calls`
   answers it before the first model step, by running it again when the tool has no side
   effect, and otherwise by recording that it was interrupted (so a write never happens twice
   for one recorded call).

A tool that answers later (delegation) returns `ToolResult(park=Park(...))`: its call stays open,
the loop records the other results of the step and ends with `TurnResult.park` set; the runner
parks the run (`waiting`). That is the one place a tool can park a run.

Budgets (server/config.py): tool steps per run, tokens per run, wall time per run, and the
characters of a tool result fed back (cut with a note). A spent budget ends the run with a
`budget-exceeded` error. Tokens are counted per step by server/runtime/token_count.py (the
provider's figures unless missing or implausible), over all the run's turns, and checked before
each model step against the run's allowance less what its delegated runs used or hold reserved
(docs/operations.md "Delegation, parked runs and MCP servers").

Plans: a plan the model keeps with the `plan` verb is shown to it each step (`<plan_state>`, never
stored), and a run that ends its answer with steps of its own plan still open is handed a
continuation prompt (a user message with actor `system`), at most MAX_CONTINUATIONS times; then
it ends succeeded, owing them (`unmetObligations`, and a notice on the log).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from seed_agents.protocol.agent import plans
from seed_agents.protocol.agent.tool_registry import VERBS as _VERBS

from ..clock import new_id
from ..providers.base import ChatMessage, Reasoning, TextDelta, ToolCall, Usage
from ..store import delegation as delegation_q
from ..store import events as events_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from ..store import tool_events
from ..store.errors import NotFound
from ..tools import records
from ..tools.context import Park, ToolResult
from ..tools.surface import ToolSurface, parse_arguments, side_effects
from . import token_count, turns
from .history import SessionHistory, result_text

log = logging.getLogger("seed_agents.runtime")

MAX_CONTINUATIONS = 3
DETAIL_CHARS = 120
# Tool calls one model step may make; more are answered with an error, not run.
MAX_CALLS_PER_STEP = 32


class BudgetSpent(Exception):
    """A budget of the run is spent; the message says which and how to change it."""


class TurnGone(Exception):
    """The session was deleted, or (shared store) the run is no longer this server's: the turn
    writes nothing more."""


@dataclass(frozen=True)
class Budgets:
    steps: int
    tokens: int             # the run's allowance: --max-run-tokens, or a delegated run's share
    seconds: float
    output_chars: int
    tool_timeout: float
    event_bytes: int = events_q.MAX_EVENT_BYTES   # a larger event is stored cut (store/large_events.py)
    spent_own: int = 0      # tokens the run counted in its earlier turns (before it parked)
    spent_below: int = 0    # its delegated runs': ended ones' use, live ones' reservations

    @classmethod
    def from_config(cls, config) -> "Budgets":  # noqa: ANN001
        return cls(config.max_tool_steps, config.max_run_tokens, config.max_run_seconds,
                   config.max_tool_output_chars, config.tool_timeout, config.max_event_bytes)


@dataclass
class LoopOutcome:
    text: str = ""                      # the final answer
    step_usage: Usage | None = None     # the usage of the step that produced it
    usage: Usage | None = None          # the run's, all steps
    message_started: float = 0.0        # perf_counter() since which the final message counts
    unmet: list = field(default_factory=list)   # obligations still open at the end
    park: Park | None = None
    streaming: list[str] = field(default_factory=list)   # the text of the model step under way
    spoke: bool = False                 # this turn recorded an assistant message with text


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    if b is None:
        return a
    if a is None:
        return b
    return Usage(a.input + b.input, a.output + b.output, a.cache_read + b.cache_read,
                 a.cache_write + b.cache_write, a.total + b.total)


class ToolLoop:
    def __init__(self, *, db, publisher, now_ms: Callable[[], int], run: dict, agent: dict,  # noqa: ANN001
                 provider, model: str, provider_type: str, history: SessionHistory,
                 messages: list[ChatMessage], surface: ToolSurface | None, budgets: Budgets,
                 still_ours: Callable | None, gone: Callable[[], bool],
                 rebuild: Callable[[], list[ChatMessage]], metrics=None) -> None:  # noqa: ANN001
        self.db = db
        self.publisher = publisher
        self.now_ms = now_ms
        self.run = run
        self.run_id = run["id"]
        self.session_id = run["sessionId"]
        self.agent = agent
        self.provider = provider
        self.model = model
        self.provider_type = provider_type
        self.history = history
        self.messages = messages
        self.surface = surface
        self.tools = surface.provider_tools() if surface is not None else ()
        self.budgets = budgets
        self.still_ours = still_ours     # shared store: (conn) -> bool, checked in every write
        self.gone = gone
        self.rebuild = rebuild           # the messages again, from the history (after a resume)
        self.metrics = metrics
        self.steps = 0
        self.counted = 0   # this turn's tokens as the budget counts them (server/runtime/token_count.py)
        self.continuations = 0
        self.used_ids = history.call_ids()
        self.out = LoopOutcome()
        self.pending: list[asyncio.Task] = []   # result writes not waited for (see the module doc)

    # -- the loop ---------------------------------------------------------------------------

    async def run_turn(self) -> LoopOutcome:
        out = self.out
        out.message_started = time.perf_counter()
        self._activity({"phase": "starting"})
        try:
            async with asyncio.timeout(self.budgets.seconds):
                try:
                    await self._loop()
                except asyncio.CancelledError:
                    raise   # (the result writes in flight still commit, in order)
                except BaseException:
                    await self._settle_pending(quiet=True)
                    raise
                await self._settle_pending()
        except TimeoutError:
            raise BudgetSpent(f"the run was still working after {self.budgets.seconds:g} s, the most a run "
                              "may take on this server (--max-run-seconds); it was stopped") from None
        return out

    async def _loop(self) -> None:
        out = self.out
        await self.resume_open_calls()
        if out.park is not None or (self.surface is not None and self.surface.finished):
            return   # a resumed call parks the run again, or a typed child had delivered its result
        while True:
            self._activity({"phase": "thinking"})
            step_started = time.perf_counter()
            messages = self._with_plan_state()
            self._check_tokens(before_step=True)   # spent (by this run or the runs it delegated): no step
            model_started = time.perf_counter()
            text, calls, reasoning, usage = await self._model_step(messages)
            outside = time.perf_counter() - model_started   # the model's time, then the tools' too
            out.usage = add_usage(out.usage, usage)
            self.counted += token_count.step_tokens(usage, messages, text, calls, reasoning)
            if calls:
                self.steps += 1
                if self.steps > self.budgets.steps:
                    raise BudgetSpent(f"the model asked for more than {self.budgets.steps} tool steps, the most a "
                                      "run may take on this server (--max-tool-steps); it was stopped")
                recorded = await self._record_calls(text, calls, usage, reasoning)
                self.messages.append(ChatMessage("assistant", text, tool_calls=tuple(c for c, _ in recorded),
                                                 reasoning=reasoning.blocks if reasoning else ()))
                self._usage_patch()
                for n, (call, params) in enumerate(recorded):
                    if n >= MAX_CALLS_PER_STEP:
                        result, started = ToolResult(error=f"not run: a step may make at most {MAX_CALLS_PER_STEP} "
                                                           "tool calls"), None
                    else:
                        result, started = await self._run_call(call, params)
                        outside += time.perf_counter() - started
                    if self.metrics is not None:
                        self.metrics.tool_calls.labels(call.name if call.name in _VERBS else "unknown",
                                                       "error" if result.error is not None else "ok").inc()
                    if result.park is not None:
                        out.park = out.park or result.park
                        continue   # its result comes later; the call stays open
                    await self._record_result(call, result, started)
                if self.metrics is not None:
                    self.metrics.tool_step_overhead.observe(time.perf_counter() - step_started - outside)
                self._check_tokens()
                if out.park is not None or (self.surface is not None and self.surface.finished):
                    return   # parked (delegation), or a typed child delivered its result
                continue
            self._check_tokens()
            owed = [] if self.surface is None else plans.open_steps(
                self.db.read(sessions_q.get_plan, self.session_id), self.run_id)
            if owed and self.continuations < MAX_CONTINUATIONS:
                self.continuations += 1
                await self._record_continuation(text, usage, owed)
                continue
            out.text, out.step_usage = text, usage
            if owed:
                out.unmet = [{"kind": "plan", "steps": owed}]
            self._activity({"phase": "finalizing"})
            return

    def spent(self) -> int:
        """The run's own tokens, all its turns (what its budget row records)."""
        return self.budgets.spent_own + self.counted

    def _check_tokens(self, before_step: bool = False) -> None:
        b = self.budgets
        used = self.spent() + b.spent_below
        if used < b.tokens or (used == b.tokens and not before_step):
            return
        if b.spent_below:
            raise BudgetSpent(f"the token budget ended: this run and the runs it delegated used {used} of the "
                              f"{b.tokens} tokens it may use (--max-run-tokens; a delegated run gets a share of "
                              "its parent's); it was stopped")
        raise BudgetSpent(f"the token budget ended: the run used {used} tokens, at or past the {b.tokens} it may "
                          "use (--max-run-tokens; a delegated run gets a share of its parent's); it was stopped")

    # -- one model step ---------------------------------------------------------------------

    async def _model_step(self, messages: list[ChatMessage]):  # noqa: ANN202
        parts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: Reasoning | None = None
        usage: Usage | None = None
        publisher, session_id, run_id = self.publisher, self.session_id, self.run_id
        self.out.streaming = parts   # what a stop leaves in the log (stopped_message)
        async for item in self.provider.stream(self.model, messages, self.tools):
            if isinstance(item, TextDelta):
                if item.text and not self.gone():
                    if not parts:
                        self._activity({"phase": "responding"})
                    parts.append(item.text)
                    publisher.publish_partial(session_id, run_id, {"textDelta": item.text})
            elif isinstance(item, ToolCall):
                calls.append(item)
            elif isinstance(item, Reasoning):
                reasoning = item
            elif isinstance(item, Usage):
                usage = item
        return "".join(parts), calls, reasoning, usage

    def _with_plan_state(self) -> list[ChatMessage]:
        if self.surface is None:
            return self.messages
        plan = self.db.read(sessions_q.get_plan, self.session_id)
        if not plan or (plans.is_settled(plan) and plan.get("ownerRunId") != self.run_id):
            return self.messages   # a finished checklist of an earlier run is history
        block = plans.plan_state_block(plan)
        return self.messages + [ChatMessage("system", block)] if block else self.messages

    def stopped_message(self) -> dict:
        """What a stopped turn leaves in the log, as the reference does: the text streamed so far
        by the model step under way (the reply the user watched), else "Stopped." when the turn
        had said nothing yet; nothing when it had (its words are in the log already)."""
        text = "".join(self.out.streaming)
        if text.strip():   # meta.stopped: clients mark the cut reply (the CLI's `[stopped]`)
            return {"type": "message", "role": "assistant", "content": text,
                    "meta": {**self._meta(None, self.out.message_started), "stopped": True}}
        if self.out.spoke:
            return {}
        return {"type": "message", "role": "assistant", "content": "Stopped.",
                "meta": {"runId": self.run_id, "stopped": True}}

    # -- recording --------------------------------------------------------------------------

    def _meta(self, usage: Usage | None = None, started: float | None = None) -> dict:
        meta: dict = {"model": self.model, "provider": self.provider_type, "runId": self.run_id}
        if usage is not None:
            meta["usage"] = usage.to_wire()
        if started is not None:
            meta["durationMs"] = int((time.perf_counter() - started) * 1000)
        return meta

    def _call_id(self, call: ToolCall) -> str:
        call_id = call.id if call.id and len(call.id) <= 200 and call.id not in self.used_ids else ""
        call_id = call_id or "call_" + new_id()
        self.used_ids.add(call_id)
        return call_id

    async def _write(self, payloads: list[dict], extra=None):  # noqa: ANN001, ANN202
        """Append `payloads` (and run `extra(conn)`) in one transaction, then publish them."""
        now = self.now_ms()
        session_id, still_ours, max_bytes, run = self.session_id, self.still_ours, self.budgets.event_bytes, self.run

        def job(conn):
            if still_ours is not None and not still_ours(conn):
                return None
            try:
                # (the run's journal points at its calls and results: JournalFull at its cap)
                effects = tool_events.record(conn, session_id, payloads, now, new_id, run=run, max_bytes=max_bytes)
            except NotFound:
                return None   # the session was deleted meanwhile
            return effects, extra(conn, now) if extra is not None else None

        done = await self.db.write(job)
        if done is None or self.gone():
            raise TurnGone()
        effects, extra_out = done
        turns.publish(self.publisher, None, effects)
        return extra_out

    async def _record_calls(self, text: str, calls: list[ToolCall], usage: Usage | None,
                            reasoning: Reasoning | None = None):
        """The step's text (when it said something) and its calls, with the run's usage so far.
        What the provider wants back with them (Anthropic's signed thinking blocks, Gemini's
        thought signatures) is kept in the calls' `meta`, so a run taken up again after a crash
        hands the provider the same step."""
        payloads: list[dict] = []
        if text.strip():
            payloads.append({"type": "message", "role": "assistant", "content": text,
                             "meta": self._meta(usage, self.out.message_started)})
            self.out.spoke = True
        self.out.streaming = []
        recorded: list[tuple[ToolCall, dict | None]] = []
        for n, call in enumerate(calls):
            call_id = self._call_id(call)
            params, _ = parse_arguments(call)
            if n >= MAX_CALLS_PER_STEP:
                params = None
            recorded.append((ToolCall(call_id, call.name[:200], json.dumps(params if params is not None else {}),
                                      call.oversize, call.extra), params))
            meta = self._meta(usage if n == 0 else None)
            if n == 0 and reasoning is not None and reasoning.blocks:
                meta["reasoning"] = list(reasoning.blocks)
            if call.extra:
                meta["providerState"] = dict(call.extra)
            payloads.append(records.call_event(call_id, call.name[:200], params if params is not None else {},
                                               "agent", meta))
        usage_wire = self.out.usage.to_wire() if self.out.usage is not None else None
        write = self._write_calls(payloads, usage_wire, self.spent())
        if any(side_effects(c.name, c.arguments) for c in calls):
            await write   # a call with side effects is on disk before it runs
        else:
            # Read-only calls: their record is queued ahead of their results; a crash before it
            # commits only means the step is asked of the model again.
            self.pending.append(asyncio.create_task(write, name=f"calls:{self.run_id}"))
        self.out.message_started = time.perf_counter()
        # The model is handed back its calls as it made them (malformed arguments included).
        return [(ToolCall(c.id, c.name, original.arguments if not original.oversize else "{}", original.oversize,
                          original.extra), params)
                for (c, params), original in zip(recorded, calls)]

    async def _write_calls(self, payloads: list[dict], usage_wire: dict | None, spent: int) -> None:
        run = await self._write(payloads, (lambda conn, now: self._save_usage(conn, usage_wire, spent)))
        if run is not None:
            self.publisher.publish_run(runs_q.public(run))

    def _save_usage(self, conn, usage_wire: dict | None, spent: int) -> dict | None:  # noqa: ANN001
        delegation_q.record_spent(conn, self.run_id, spent)   # (what the run's tree is charged)
        if usage_wire is None:
            return None
        return runs_q.set_usage(conn, self.run_id, usage_wire)

    async def _run_call(self, call: ToolCall, params: dict | None) -> tuple[ToolResult, float]:
        """(the call's result, when it started); a tool that fails or hangs is answered with an
        error, and the run goes on."""
        detail = _detail(params)
        self._activity({"phase": "tool", "toolName": call.name, "toolCallId": call.id,
                        **({"detail": detail} if detail else {})})
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.budgets.tool_timeout):
                result = await self.surface.run(call)
        except TimeoutError:
            result = ToolResult(error=f"{call.name} did not finish within {self.budgets.tool_timeout:g} s "
                                      "(--tool-timeout); it was stopped")
        except Exception as exc:  # a bug in a tool must not end the run
            log.exception("tool %s failed in run %s", call.name, self.run_id)
            result = ToolResult(error=f"{call.name} failed: internal error ({type(exc).__name__})")
        return result, started

    async def _settle_pending(self, quiet: bool = False) -> None:
        """Wait for the result writes still in flight (a session gone shows here too)."""
        pending, self.pending = self.pending, []
        for task in pending:
            try:
                await task
            except Exception:
                if not quiet:
                    raise

    async def _record_result(self, call: ToolCall, result: ToolResult, started: float | None) -> None:
        payload = self.result_payload(call.id, call.name, result, started)
        if any(t.done() for t in self.pending):   # surface a failed one now (TurnGone)
            await self._settle_pending()
        self.pending.append(asyncio.create_task(self._write([payload]), name=f"result:{call.id}"))
        self.messages.append(ChatMessage("tool", result_text(payload), tool_call_id=call.id, name=call.name,
                                         is_error="error" in payload))
        self._activity({"phase": "thinking"})

    def result_payload(self, call_id: str, name: str, result: ToolResult, started: float | None) -> dict:
        return records.result_event(call_id, name, result, "agent", self.budgets.output_chars,
                                    self._meta(None, started))

    async def _record_continuation(self, text: str, usage: Usage | None, owed: list[str]) -> None:
        payloads = []
        if text.strip():
            payloads.append({"type": "message", "role": "assistant", "content": text,
                             "meta": self._meta(usage, self.out.message_started)})
            self.out.spoke = True
        self.out.streaming = []
        prompt = {"type": "message", "role": "user", "actor": "system", "content": plans.continuation_prompt(owed),
                  "meta": {"runId": self.run_id}}
        payloads.append(prompt)
        await self._write(payloads)
        if text.strip():
            self.messages.append(ChatMessage("assistant", text))
        self.messages.append(ChatMessage("user", prompt["content"]))
        self.out.message_started = time.perf_counter()

    # -- resuming ---------------------------------------------------------------------------

    async def resume_open_calls(self) -> None:
        """Answer the calls this run recorded without a result (the server stopped between a call
        and its result): a tool without side effects runs again; one with side effects is not
        run twice, the model is told it was interrupted."""
        open_calls = self.history.open_calls(self.run_id)
        if not open_calls:
            return
        for entry in open_calls:
            call = ToolCall(entry.call_id, entry.name, entry.content)
            params, _ = parse_arguments(call)
            started = None
            if side_effects(entry.name, entry.content) or self.surface is None:
                result = ToolResult(error=(
                    f"interrupted: the server stopped while this {entry.name} call was running, and it was not run "
                    "again, so it may or may not have taken effect. Check (read the address) before trying again."))
            else:
                result, started = await self._run_call(call, params)
                if result.park is not None:
                    self.out.park = self.out.park or result.park
                    continue
            await self._write([self.result_payload(entry.call_id, entry.name, result, started)])
        # The messages were built before these results existed: build them again.
        self.messages[:] = self.rebuild()

    # -- live patches -----------------------------------------------------------------------

    def _activity(self, activity: dict) -> None:
        # (Not for the built-in echo provider, which is offered no tools: its turns stream its
        # reply and nothing else, as they always have.)
        if self.surface is not None and not self.gone():
            self.publisher.publish_partial(self.session_id, self.run_id, {"activity": activity})

    def _usage_patch(self) -> None:
        if self.out.usage is not None and not self.gone():
            self.publisher.publish_partial(self.session_id, self.run_id, {"usage": self.out.usage.to_wire()})


bounded_output = records.bounded_output   # (its home is server/tools/records.py)


def _detail(params: dict | None) -> str:
    if not params:
        return ""
    for key in ("address", "tool", "url", "query", "title"):
        value = params.get(key)
        if isinstance(value, str) and value:
            return value if len(value) <= DETAIL_CHARS else value[:DETAIL_CHARS - 1] + "…"
    return ""


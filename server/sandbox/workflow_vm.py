"""The engine a workflow (a script child) runs in: QuickJS, embedded through `python-quickjs-ng`
(docs/operations.md "The workflow engine" says why this binding; bench/workflow_engines.py
measures the candidates).

The realm has no ambient authority: no clock (`Date` throws), no randomness (`Math.random`
throws), no timers, no network, no `performance`, no weak references (their timing is the
collector's); every effect is a `ctx` member that enqueues a request to the host and returns a
promise the host settles later (server/runtime/workflows.py journals and replays them). The VM is
synchronous: the host drains what the script enqueued, delivers results and pumps the promise
jobs itself, one slice at a time. Nothing inside the engine calls into Python: the binding
refuses host functions while a time limit is set (bench/workflow_engines.py), so the script's
requests go to an outbox in the realm that the host empties after each slice (`__drain`).

Caps, each ending the run with a clear error: memory (the engine's allocator limit), fuel (the
CPU a slice may use between two deliveries: the engine's own interrupt for one eval or one
promise job, and the sum over a slice's jobs for a script that spins on microtasks), the stack, and the size of what
crosses the boundary. A context belongs to the thread that made it (the engine records that
thread's stack), so each VM lives in one thread of its own for its whole life.
"""
from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import quickjs

MAX_CROSSING_BYTES = 1024 * 1024    # one effect's arguments, or the script's result, as JSON
STACK_BYTES = 4 * 1024 * 1024       # (the engine's frames are large: 1 MiB overflows at ~1,500 calls)

PRELUDE = r"""
"use strict";
var __workflow_main;
var __pending = new Map();
var __nextCallId = 1;
var __outbox = [];
var __progress = null;
var __finished = null;
var __MAX_CROSSING = %d;
function __host_enqueue(op, id, json) { __outbox.push([op, id, json.length > __MAX_CROSSING ? null : json]); }
function __host_notify(kind, json) { if (kind === 'progress' && json.length <= 4096) __progress = json; }
function __host_finish(ok, json) {
  __finished = json.length > __MAX_CROSSING ? [false, null] : [ok, json];
}
function __drain() {
  var out = JSON.stringify({e: __outbox, p: __progress, f: __finished});
  __outbox = []; __progress = null;
  return out;
}
class ActionError extends Error {
  constructor(info) {
    super(info && info.message ? info.message : 'Action failed');
    this.code = info && info.code ? info.code : 'tool-error';
    this.retryable = Boolean(info && info.retryable);
    this.detail = info ? info.detail : undefined;
    this.tool = info && info.tool ? String(info.tool) : undefined;
    this.callSeq = info && typeof info.callSeq === 'number' ? info.callSeq : undefined;
    this.stack = undefined;
  }
}
function __call(op, args) {
  var id = __nextCallId++;
  var promise = new Promise(function (resolve, reject) { __pending.set(id, {resolve: resolve, reject: reject}); });
  __host_enqueue(op, id, JSON.stringify(args === undefined ? null : args));
  return promise;
}
function __deliver(id, ok, json) {
  var entry = __pending.get(id);
  __pending.delete(id);
  if (!entry) return;
  var value = json === '' ? undefined : JSON.parse(json);
  if (ok) entry.resolve(value); else entry.reject(new ActionError(value));
}
function __makeCtx(input, runId) {
  var stepCount = 0;
  // Labels of the ctx.step blocks running, innermost last: a child spawned in one is stamped
  // with it (RunInfo.stepLabel), so the run card shows a step and its worker as one item.
  var openSteps = [];
  function closeStep(label) {
    var index = openSteps.lastIndexOf(label);
    if (index >= 0) openSteps.splice(index, 1);
  }
  function delegate(spec) {
    var step = openSteps.length ? openSteps[openSteps.length - 1] : undefined;
    return __call('agent', {spec: spec, step: step}).then(function (res) {
      if (res && res.status === 'succeeded') return res.output;
      throw new ActionError({
        code: res && res.status === 'canceled' ? 'canceled' : (res && res.error && res.error.code) || 'agent-failed',
        message: (res && res.error && res.error.message) || 'Sub-agent ' + ((res && res.status) || 'failed'),
      });
    });
  }
  return Object.freeze({
    input: input,
    runId: runId,
    call: function (tool, toolInput, opts) { return __call('tool', {tool: tool, input: toolInput, opts: opts}); },
    delegate: delegate,
    agent: delegate,
    sleep: function (ms) { return __call('sleep', {ms: ms}); },
    waitForEvent: function (match, opts) { return __call('wait', {match: match, opts: opts}); },
    continueAsNew: function (state) { return __call('continueAsNew', {state: state}); },
    minutes: function (n) { return n * 60000; },
    hours: function (n) { return n * 3600000; },
    now: function () { return __call('now', {}); },
    log: function (level, message, data) { return __call('log', {level: level, message: message, data: data}); },
    progress: function (patch) { __host_notify('progress', JSON.stringify(patch === undefined ? null : patch)); },
    plan: function (plan) { return __call('plan', {plan: plan}); },
    step: function (label, fn) {
      var id = 'step-' + (++stepCount);
      return __call('step', {stepId: id, label: String(label), phase: 'start'}).then(function () {
        openSteps.push(String(label));
        return Promise.resolve().then(fn).then(function (value) {
          closeStep(String(label));
          return __call('step', {stepId: id, label: String(label), phase: 'end', ok: true}).then(function () { return value; });
        }, function (error) {
          closeStep(String(label));
          return __call('step', {stepId: id, label: String(label), phase: 'end', ok: false}).then(function () { throw error; });
        });
      });
    },
    parallel: function (thunks) {
      return Promise.all(thunks.map(function (thunk) { return Promise.resolve().then(thunk); }));
    },
    parallelSettled: function (thunks) {
      return Promise.allSettled(thunks.map(function (thunk) { return Promise.resolve().then(thunk); }));
    },
  });
}
Math.random = function () { throw new Error('Math.random is not available in workflows; take randomness as input'); };
Date = function () { throw new Error('Date is not available in workflows; use await ctx.now()'); };
delete globalThis.performance;
delete globalThis.WeakRef;
delete globalThis.FinalizationRegistry;
delete globalThis.SharedArrayBuffer;
delete globalThis.Atomics;
""" % MAX_CROSSING_BYTES

KICKOFF = """
(function () {
  if (typeof __workflow_main !== 'function') throw new Error('export default must be a function');
  var ctx = __makeCtx(%s, %s);
  Promise.resolve().then(function () { return __workflow_main(ctx.input, ctx); }).then(function (value) {
    __host_finish(true, JSON.stringify(value === undefined ? null : value));
  }, function (error) {
    __host_finish(false, JSON.stringify({
      code: error && error.code ? String(error.code) : 'workflow-error',
      message: error && error.message ? String(error.message) : String(error),
      stack: error && error.stack ? String(error.stack) : undefined,
      tool: error && error.tool ? String(error.tool) : undefined,
      callSeq: error && typeof error.callSeq === 'number' ? error.callSeq : undefined,
    }));
  });
})();
"""


class VMError(Exception):
    """The VM stopped the script: `code` is fuel-exhausted, memory-cap, workflow-error, ..."""

    def __init__(self, code: str, message: str, stack: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.stack = code, message, stack

    def info(self) -> dict:
        out = {"code": self.code, "message": self.message}
        if self.stack:
            out["stack"] = self.stack
        return out


class WorkflowVM:
    """One workflow's realm. `effects` fills with (callId, op, args) as the script asks; `finished`
    is (ok, value) once its function settled; `progress` collects ctx.progress patches."""

    def __init__(self, *, memory_bytes: int, fuel_ms: int) -> None:
        self.memory_bytes = memory_bytes
        self.fuel_ms = fuel_ms
        self.effects: list[tuple[int, str, object]] = []
        self.progress: list[dict] = []
        self.finished: tuple[bool, object] | None = None
        self.oversized: list[int] = []   # calls whose arguments were over MAX_CROSSING_BYTES
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="workflow-vm")
        self._ctx: quickjs.Context | None = None
        self._slice_cpu = 0.0

    # -- the thread ------------------------------------------------------------------------
    async def _in_thread(self, fn, *args):  # noqa: ANN001, ANN202
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        def drop() -> None:
            self._ctx = None   # freed in the thread that made it
        try:
            self._pool.submit(drop)
        except RuntimeError:
            pass
        self._pool.shutdown(wait=False)

    def _drain(self) -> None:
        """What the script asked for during the slice: its effects, its last progress patch,
        its ending."""
        try:
            box = json.loads(self._ctx.eval("__drain()"))
        except Exception as exc:  # noqa: BLE001 - (out of memory while draining)
            raise self._fail(exc, "drain") from None
        for op, call_id, args_json in box["e"]:
            if args_json is None:
                self.oversized.append(int(call_id))
                continue
            self.effects.append((int(call_id), str(op), json.loads(args_json)))
        if box["p"] is not None:
            patch = json.loads(box["p"])
            if isinstance(patch, dict):
                self.progress.append(patch)
        if box["f"] is not None and self.finished is None:
            ok, value_json = box["f"]
            if value_json is None:
                self.finished = (False, {"code": "output-too-large",
                                         "message": f"the script's result is over {MAX_CROSSING_BYTES} bytes as JSON"})
            else:
                self.finished = (bool(ok), json.loads(value_json))

    # -- running -----------------------------------------------------------------------------
    def _fail(self, exc: Exception, where: str) -> VMError:
        text = str(exc)
        first = text.splitlines()[0] if text else type(exc).__name__
        if "interrupted" in first:
            return VMError("fuel-exhausted", f"the script computed for more than {self.fuel_ms} ms without "
                                             f"awaiting a ctx call ({where}); move heavy computation to execute")
        if "out of memory" in first or isinstance(exc, MemoryError):
            return VMError("memory-cap", f"the script used more than {self.memory_bytes // (1024 * 1024)} MiB of "
                                         "engine memory")
        if isinstance(exc, quickjs.StackOverflow) or "stack" in first.lower() and "overflow" in first.lower():
            return VMError("stack-overflow", "the script recursed too deeply")
        return VMError("workflow-error", first[:2000], text[:8000] if "\n" in text else None)

    def _eval(self, code: str, where: str) -> None:
        self._slice_cpu = 0.0
        try:
            self._ctx.eval(code)
        except Exception as exc:  # noqa: BLE001 - the engine's JSException, StackOverflow, ...
            raise self._fail(exc, where) from None
        self._pump(where)
        self._drain()

    def _pump(self, where: str) -> None:
        """Run the promise jobs until none is left, within the slice's fuel."""
        ctx = self._ctx
        started = time.thread_time()
        while True:
            try:
                more = ctx.execute_pending_job()
            except Exception as exc:  # noqa: BLE001
                raise self._fail(exc, where) from None
            if not more:
                return
            if (time.thread_time() - started) * 1000 > self.fuel_ms:
                raise VMError("fuel-exhausted", f"the script computed for more than {self.fuel_ms} ms without "
                                                "awaiting a ctx call (promise jobs); move heavy computation to execute")

    def _start(self, source: str, input_json: str, run_id: str) -> None:
        ctx = self._ctx = quickjs.Context()
        ctx.set_memory_limit(self.memory_bytes)
        ctx.set_max_stack_size(STACK_BYTES)
        ctx.set_time_limit(self.fuel_ms / 1000)   # CPU, per eval and per promise job
        self._eval(PRELUDE, "prelude")
        self._eval(source, "workflow")
        self._eval("delete globalThis.eval;" + KICKOFF % (input_json, json.dumps(run_id)), "kickoff")

    def _deliver(self, deliveries: list[tuple[int, bool, object]]) -> None:
        parts = []
        for call_id, ok, value in deliveries:
            text = "" if value is None and not ok else json.dumps(value, ensure_ascii=False)
            parts.append(f"__deliver({int(call_id)}, {'true' if ok else 'false'}, {json.dumps(text)});")
        self._eval("\n".join(parts), "deliver")

    async def start(self, source: str, input_value, run_id: str) -> None:  # noqa: ANN001
        await self._in_thread(self._start, source, json.dumps(input_value, ensure_ascii=False), run_id)

    async def deliver(self, deliveries: list[tuple[int, bool, object]]) -> None:
        """Settle these calls (callId, ok, value) and run the script until it waits again."""
        if deliveries:
            await self._in_thread(self._deliver, deliveries)

    def take_effects(self) -> list[tuple[int, str, object]]:
        out, self.effects = self.effects, []
        return out

"""Code in the sandbox: the `execute` callable and authored (lambda) tools.

Both run as the agent, in the sandbox the server chose at start (server/sandbox/), with the
agent's memory as the working folder: every memory file is checked out into the sandbox, and
when the code ends what it wrote or changed becomes new memory versions and what it deleted is
deleted, all in one transaction (a crash before that transaction commits changes nothing). The
run happens in a child process; the event loop only moves its bounded output, and a tail of it
goes to the session as `activity` partials at most every 250 ms.

Gates, as the reference: the runtime must be one this server offers, and the agent must hold the
`execute` grant (a lambda is code in the sandbox, so writing one is no way around an owner who
turned code execution off).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from seed_agents.protocol.wire import file_rules
from seed_agents.protocol.agent import tool_registry as registry
from seed_agents.protocol.agent import lambda_abi as abi
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.tool_documents import schema_errors

from ..sandbox.port import Job, Outcome, SandboxError
from ..store import memory as memory_q
from ..store.errors import Refused
from .context import ToolContext, ToolFailure, ToolResult

EXECUTE = "execute"
_SIGNALS = {9: "SIGKILL", 24: "SIGXCPU", 25: "SIGXFSZ", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM"}


@dataclass
class CodeExec:
    """What a tool needs to run code: the sandbox, its default time, and the memory limits its
    commits are held to (the same as any memory write's)."""

    sandbox: Any                                   # a server.sandbox.port.Sandbox
    default_timeout: float = 60.0
    limits: memory_q.MemoryLimits = memory_q.MemoryLimits()
    max_timeout: float = abi.MAX_EXEC_TIMEOUT_SECS   # held under --tool-timeout, which would stop the call
    output_chars: int = 40_000   # --max-tool-output-chars: stdout and stderr are cut to fit in it together

    @property
    def runtimes(self) -> tuple[str, ...]:
        a = self.sandbox.availability
        return a.runtimes if a.available else ()

    @functools.cached_property
    def tool(self) -> registry.Tool:
        """`execute` as this server runs it: its runtimes, its sandbox, its limits."""
        a, lim = self.sandbox.availability, getattr(self.sandbox, "limits", None)
        how = {"python": '"python" runs it with python3', "shell": '"shell" runs it with sh',
               "ts": '"ts" runs ' + a.notes.get("ts", "JavaScript with node")}
        names = {"python": "Python", "shell": "shell", "ts": "TypeScript" if "TypeScript" in a.notes.get("ts", "")
                 else "JavaScript"}
        langs = [names[r] for r in self.runtimes]
        network = ("The sandbox may open outbound connections." if getattr(self.sandbox, "network", False)
                   else "The sandbox has no network access: fetch data with the read verb into memory first.")
        bounds = (f" Limits: {self.default_timeout:g} s unless timeout_secs says otherwise (at most "
                  f"{self.max_timeout:g}), "
                  f"{lim.memory_bytes >> 20} MiB of memory per process, {lim.processes} processes, "
                  f"{lim.workspace_bytes >> 20} MiB of files, 64 KiB each of stdout and stderr." if lim else "")
        description = (
            f"Run {', '.join(langs[:-1]) + ' or ' + langs[-1] if len(langs) > 1 else ''.join(langs)} code in an "
            "isolated sandbox (Linux namespaces, no virtual machine) with your persistent memory as the working "
            "folder /workspace: the files there are your ~/memory files, and what your code writes, changes or "
            "deletes there is committed to your memory when it ends. Use it to process, transform, analyze or "
            "generate memory files. Each call runs in a fresh sandbox: nothing (variables, installed packages, "
            f"processes) survives between calls, so persist what matters as files. {network}{bounds} Output "
            "returns stdout, stderr, the exit code, and which memory files changed.")
        runtime_help = "How to run the code: " + "; ".join(how[r] for r in self.runtimes) + "."
        return registry.execute_for_server(self.runtimes, description, runtime_help)


def server_tools(ctx: ToolContext) -> dict[str, registry.Tool]:
    """The registry tools this server describes its own way (`execute`), by name."""
    return {EXECUTE: ctx.code.tool} if ctx.code is not None and ctx.code.runtimes else {}


@dataclass
class Ran:
    outcome: Outcome
    changed: list[dict]          # [{path, change}] as the reference's changedFiles
    note: str = ""               # why memory was not changed, or what was kept


def _runtimes(ctx: ToolContext) -> tuple[str, ...]:
    return ctx.code.runtimes if ctx.code is not None else ()


async def _run(ctx: ToolContext, runtime: str, code: str, timeout: float, module: str | None,
               detail: str, call_id: str) -> Ran:
    agent_id, account = ctx.agent["id"], ctx.account
    limit = ctx.code.sandbox.limits.workspace_bytes if hasattr(ctx.code.sandbox, "limits") else 256 << 20
    base = await ctx.db.aread(memory_q.checkout, agent_id, limit, large=True)
    if base is None:
        raise ToolFailure(f"your memory is larger than the sandbox's working folder ({limit} bytes): "
                          "delete or move files first")

    def progress(tail: str) -> None:
        if ctx.run_id:
            ctx.publisher.publish_partial(ctx.session_id, ctx.run_id, {"activity": {
                "phase": "tool", "toolName": "call", "toolCallId": call_id, "detail": detail, "outputTail": tail}})

    progress("")
    try:
        outcome = await ctx.code.sandbox.run(Job(runtime, code, timeout, {p: d for p, (_, d) in base.items()},
                                                 progress=progress if ctx.run_id else None, module=module))
    except SandboxError as exc:
        raise ToolFailure(f"the code sandbox failed: {exc}") from None
    if outcome.files is None:
        return Ran(outcome, [], f"memory was not changed: {outcome.workspace_note}")
    written, refused = {}, []
    for path, data in outcome.changed.items():
        try:
            clean = file_rules.memory_path(path)
        except (ProtocolError, Refused) as exc:
            refused.append(f"{path[:100]} ({exc.message})")
            continue
        if clean != path:
            refused.append(f"{path[:100]} (not a memory path)")
        elif path not in base or base[path][1] != data:   # (written again with the same bytes: no change)
            written[path] = data
    before = base
    removed = sorted(set(base) - set(outcome.files))
    changed = sorted([{"path": p, "change": "modified" if p in before else "added"} for p in written]
                     + [{"path": p, "change": "removed"} for p in removed], key=lambda c: c["path"])
    if not changed:
        return Ran(outcome, [], f"files not kept: {', '.join(refused)}" if refused else "")
    now = ctx.now_ms()
    blob_ids = {p: b for p, (b, _) in base.items()}
    try:
        kept = await ctx.db.write(lambda conn: memory_q.commit_workspace(
            conn, agent_id, account, blob_ids, written, removed, now, ctx.code.limits))
    except (ProtocolError, Refused) as exc:
        return Ran(outcome, [], f"memory was not changed: {exc.message}")
    ctx.publisher.notify_account(account, "agent-memory-changed", agent_id=agent_id)
    notes = ([f"kept (changed by someone else meanwhile): {', '.join(kept)}"] if kept else []) + (
        [f"files not kept: {', '.join(refused)}"] if refused else [])
    changed = [c for c in changed if not (c["change"] == "removed" and c["path"] in kept)]
    return Ran(outcome, changed, "; ".join(notes))


def _streams(outcome: Outcome, timeout: float) -> tuple[str, str, bool, list[str]]:
    """stdout and stderr bounded, whether either was cut, and the server's notes on how the run
    ended (kept apart so no cut of stderr can drop them)."""
    stdout, cut_out = abi.bound_output(outcome.stdout)
    stderr, cut_err = abi.bound_output(outcome.stderr)
    notes = []
    if outcome.timed_out:
        notes.append(f"[execution timed out after {timeout:g} s and was stopped]")
    elif outcome.signal:
        name = _SIGNALS.get(outcome.signal, f"signal {outcome.signal}")
        why = {"SIGXCPU": ": CPU time limit", "SIGKILL": ": killed (a limit was reached)",
               "SIGXFSZ": ": file size limit"}.get(name, "")
        notes.append(f"[stopped by {name}{why}]")
    cut = cut_out or cut_err or outcome.stdout_total > abi.MAX_EXEC_OUTPUT_BYTES \
        or outcome.stderr_total > abi.MAX_EXEC_OUTPUT_BYTES
    return stdout, stderr, cut, notes


def _with_notes(stderr: str, notes: list[str]) -> str:
    return "\n".join(([stderr] if stderr else []) + notes)


async def execute(ctx: ToolContext, params: dict, call_id: str) -> ToolResult:
    runtime = params["runtime"]
    offered = _runtimes(ctx)
    if runtime not in offered:
        raise ToolFailure(f"Runtime must be one of: {', '.join(offered)}" if offered else
                          "code execution is not available on this server (health: codeExec false)")
    timeout = float(min(ctx.code.max_timeout, max(1, params.get("timeout_secs") or ctx.code.default_timeout)))
    ran = await _run(ctx, runtime, params["code"], timeout, None, f"Running {runtime} code…", call_id)
    out = ran.outcome
    stdout, stderr, truncated, notes = _streams(out, timeout)
    if ran.note:
        notes.append(f"[{ran.note}]")
    n = len(ran.changed)
    changes = f", {n} memory file{'' if n == 1 else 's'} changed" if n else ""
    success = out.exit_code == 0 and not out.timed_out and not out.signal
    value = {"summary": f"Ran {runtime} code (exit {out.exit_code}, {out.duration_ms}ms{changes}).",
             "exitCode": out.exit_code, "success": success, "stdout": stdout, "stderr": stderr,
             "truncated": truncated, "durationMs": out.duration_ms, "changedFiles": ran.changed}
    return ToolResult(_fit(value, ctx.code.output_chars, notes))


def _fit(value: dict, limit: int, notes: list[str]) -> dict:
    """The result with stdout and stderr cut (their starts kept, with the reference's note) so
    that the whole fits the loop's --max-tool-output-chars, which would otherwise replace it by
    a cut text and lose its shape. The server's notes (a timeout, a signal, memory not kept) end
    stderr whole after any cut: code that floods stderr must not hide why it was stopped."""
    whole = dict(value, stderr=_with_notes(value["stderr"], notes))
    size = len(json.dumps(whole, ensure_ascii=False))
    if size <= limit:
        return whole
    rest = size - len(json.dumps(value["stdout"], ensure_ascii=False)) - len(json.dumps(whole["stderr"], ensure_ascii=False))
    room = max(0, limit - rest - len(json.dumps("\n".join(notes), ensure_ascii=False)) - 2 * len(abi.TRUNCATED_NOTE) - 64)
    err_room = min(len(value["stderr"]), room // 2)
    out_room = room - err_room
    out = dict(value, truncated=True)
    for key, keep in (("stdout", out_room), ("stderr", err_room)):
        text = value[key]
        while len(json.dumps(text[:keep], ensure_ascii=False)) > keep + 2 and keep > 0:
            keep = keep * 3 // 4   # escapes make JSON longer than the text
        if keep < len(text):
            out[key] = text[:keep] + abi.TRUNCATED_NOTE
    out["stderr"] = _with_notes(out["stderr"], notes)
    return out


async def run_lambda(ctx: ToolContext, doc: dict, value: object, call_id: str) -> ToolResult:
    """An authored tool: the input checked against its schema (a miss answers its contract), its
    source run by the ABI, its result checked against its output schema."""
    name = doc["name"]
    tool_input = value if isinstance(value, dict) else {}
    errors = schema_errors(doc.get("input") or {}, tool_input)
    if errors:
        return ToolResult({"summary": f"Input for {name} did not match its contract — here it is; call again "
                                      "with valid input.", "contract": abi.document_contract(doc, ""), "validationErrors": errors})
    source = doc.get("source") if isinstance(doc.get("source"), str) else ""
    if not source.strip():
        raise ToolFailure(f"Tool {name} has no source to run")
    runtime = abi.lambda_runtime(doc)
    if runtime not in _runtimes(ctx):
        why = ("TypeScript tools need a JavaScript runtime (node) in the sandbox, and this server has none."
               if runtime == "ts" and _runtimes(ctx) else "code execution is unavailable here.")
        raise ToolFailure(f"Tool {name} is written in {doc.get('runtime') or 'typescript'}, which this server "
                          f"cannot run: {why}")
    if EXECUTE not in ctx.callables:
        raise ToolFailure(f"Tool {name} runs code in the sandbox, which is not enabled for this agent. Its owner "
                          "can grant code execution in the agent's tool settings.")
    program, module = abi.lambda_program(runtime, source, tool_input)
    timeout = float(min(ctx.code.max_timeout, ctx.code.default_timeout))
    ran = await _run(ctx, runtime, program, timeout, module, f"Running {name}…", call_id)
    out = ran.outcome
    stdout, stderr, _, notes = _streams(out, timeout)
    stderr = _with_notes(stderr, notes)
    has_result, result, logs = abi.parse_lambda_result(stdout)
    if out.exit_code != 0 or out.timed_out or out.signal:
        tail = "\n".join((stderr.strip() or logs or "").split("\n")[-8:])
        raise ToolFailure(f"Tool {name} failed (exit {out.exit_code})" + (f":\n{tail}" if tail else ""))
    if not has_result:
        raise ToolFailure(f"Tool {name} finished without returning a value. " + (
            "Its main(input) function must return the result." if runtime == "python"
            else "Its default export must return the result."))
    if doc.get("output"):
        bad = schema_errors(doc["output"], result)
        if bad:
            raise ToolFailure(f"Tool {name} returned a value its own output schema rejects: {'; '.join(bad)}")
    n = len(ran.changed)
    changes = f", {n} memory file{'' if n == 1 else 's'} changed" if n else ""
    output: dict = {"summary": f"Ran {name} ({out.duration_ms}ms{changes}).", "result": result}
    if logs:
        output["logs"] = logs
    if ran.changed:
        output["changedFiles"] = ran.changed
    if ran.note:
        output["note"] = ran.note
    output["durationMs"] = out.duration_ms
    return ToolResult(output)

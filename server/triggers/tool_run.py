"""The `tool` continuation: one tool run headless, without a model.

The firing's transaction creates the session that is its transcript and records the call as a
`tool_call` event (`actor: "trigger"`); after the commit the tool runs here through the tool
loop's own surface, built as every entry point's is (server/runtime/tool_context.py: the same
checks, address forms, grants and network policy as a model's call, as the trigger's agent), bounded by `--tool-timeout`, and its `tool_result` lands in the session. How
it ended is the firing's `runStatus` (a failure counts towards the trigger's backoff).

A server that dies while the tool runs leaves the call without a result: it is not run again
(the firing's key is taken), as the tool loop treats a side-effecting call cut off by a crash.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time

from ..clock import new_id
from ..providers.base import ToolCall
from ..runtime import turns
from ..runtime.tool_context import Entry, build_surface
from ..store import agents as agents_q
from ..store import sessions as sessions_q
from ..store import tool_events
from ..store import trigger_firings as firings_q
from ..store import triggers as triggers_q
from ..tools import records
from ..tools.context import ToolResult
from ..tools.memory_tools import SEARCH_MEMORY
from ..tools.surface import OFFERED_VERBS, offered_callables
from .backoff import failure_backoff
from .port import TriggerContext

log = logging.getLogger("seed_agents.triggers")


def runnable(tool: str, config) -> bool:  # noqa: ANN001
    """A verb of the tool loop, or a callable tool this server offers (run through `call`)."""
    return tool in OFFERED_VERBS or tool in offered_callables(bool(config.searxng_url)) or tool == SEARCH_MEMORY


def as_call(tool: str, tool_input: dict) -> tuple[str, dict]:
    """(verb, its input): a callable tool goes through the `call` verb, as a model calls it."""
    return (tool, tool_input) if tool in OFFERED_VERBS else ("call", {"tool": tool, "input": tool_input})


def call_payload(call_id: str, tool: str, tool_input: dict, firing_id: str) -> dict:
    return records.call_event(call_id, tool, tool_input, "trigger", {"firingId": firing_id})


async def run_tool(ctx: TriggerContext, trigger: dict, firing_id: str, session_id: str, call_id: str, tool: str,
                   tool_input: dict) -> None:
    config = ctx.config
    agent = await ctx.db.aread(agents_q.get_agent, trigger["agentId"])
    if agent is None:
        return
    started = time.perf_counter()
    try:
        async with asyncio.timeout(config.tool_timeout):
            # As the trigger's agent, with what every entry point gets (the HM client, the
            # secrets box, the agent's grants): server/runtime/tool_context.py.
            surface = await build_surface(ctx.runtime, Entry("trigger"), agent, session_id, run_id=firing_id)
            verb, verb_input = as_call(tool, tool_input)
            result = await surface.run(ToolCall(call_id, verb, json.dumps(verb_input)))
    except TimeoutError:
        result = ToolResult(error=f"the tool did not finish within {config.tool_timeout:g} s")
    except Exception as exc:  # noqa: BLE001 - a bug in a tool must not take the scheduler down
        log.exception("headless tool %s of trigger %s failed", tool, trigger["id"])
        result = ToolResult(error=f"internal error while running the tool: {type(exc).__name__}")
    if result.park is not None:
        result = ToolResult(error="this tool waits for something, which a headless run cannot do")
    payload = records.result_event(call_id, tool, result, "trigger", config.max_tool_output_chars,
                                   {"firingId": firing_id, "durationMs": int((time.perf_counter() - started) * 1000)})
    now, clock_now = ctx.now_ms(), ctx.clock.now_ms()

    def job(conn):
        firings_q.set_run_status(conn, firing_id, "failed" if result.error else "succeeded")
        if result.error:
            failures = triggers_q.failures_of(conn, trigger["id"]) + 1
            triggers_q.record_outcome(conn, trigger["id"], clock_now, fired=False,
                                      error=f"tool {tool!r} failed: {result.error[:500]}",
                                      backoff_ms=failure_backoff(failures))
        else:
            triggers_q.clear_failures(conn, trigger["id"])
        if sessions_q.get_session(conn, session_id) is None:
            return None   # deleted meanwhile
        return tool_events.record(conn, session_id, [payload], now, new_id,
                                  notice=(trigger["account"], trigger["agentId"]))

    effects = await ctx.db.write(job)
    if effects is not None:
        turns.publish(ctx.broadcaster, None, effects)

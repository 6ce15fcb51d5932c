"""Recording a tool call and its result: the `tool_call` and `tool_result` events, written once
for every entry point (the tool loop, InvokeSessionTool, a trigger's `tool` continuation), with
one output bound: `--max-tool-output-chars` cuts the output and the error alike, with a note
saying what was cut. Where the events go, and in which transaction, is the caller's."""
from __future__ import annotations

import json

from .context import ToolResult


def call_event(call_id: str, name: str, tool_input, actor: str, meta: dict | None = None) -> dict:  # noqa: ANN001
    payload: dict = {"type": "tool_call", "id": call_id, "name": name, "input": tool_input, "actor": actor}
    if meta:
        payload["meta"] = meta
    return payload


def result_event(call_id: str, name: str, result: ToolResult, actor: str, limit: int,
                 meta: dict | None = None) -> dict:
    payload: dict = {"type": "tool_result", "toolCallId": call_id, "name": name, "actor": actor}
    if result.error is not None:
        payload["error"] = cut(result.error, limit)
    else:
        payload["output"] = bounded_output(result.output, limit)
    if meta is not None:
        payload["meta"] = meta
    return payload


def bounded_output(value, limit: int):  # noqa: ANN001, ANN201
    """A tool's output as recorded and fed back: itself when its JSON fits `limit` characters,
    else its text cut there with a note saying what was cut."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return value
    return {"truncated": True,
            "note": (f"This result was {len(text)} characters; only the first {limit} are shown "
                     "(--max-tool-output-chars). Ask for less (a narrower address or query) to see the rest."),
            "content": text[:limit]}


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters cut)"

"""Anthropic's Messages API, streamed (`POST {base}/v1/messages` with `stream: true`).

Events (https://docs.anthropic.com/en/api/messages-streaming): `message_start` (input usage),
`content_block_start`, `content_block_delta` (`text_delta` pieces are the reply;
`input_json_delta` pieces are a `tool_use` block's input, yielded as one ToolCall at its
`content_block_stop`; `thinking_delta` / `signature_delta` build `thinking` blocks, kept with
`redacted_thinking` ones and yielded as one Reasoning, since the API wants them back unchanged
before the `tool_use` blocks of the next step), `content_block_stop`, `message_delta` (stop reason,
cumulative output usage), `message_stop`, `ping`, and `error` (a mid-stream failure such as
`overloaded_error`). The reply is complete at `message_stop`; a stream that ends before it
without a stop reason was cut off.

Usage as the contract counts it (and as pi-ai does): `input` is `input_tokens` (which excludes
cached tokens), `cacheRead`/`cacheWrite` are `cache_read_input_tokens` /
`cache_creation_input_tokens`, `total` the sum of the four.

The system prompt goes in `system`; the Messages API wants user/assistant turns, so consecutive
messages of one role are joined (as text while they are plain text, else as content blocks: an
assistant step is its thinking, text and `tool_use` blocks; results are `tool_result` blocks in
the next user turn). Tools go in `tools` as `{name, description, input_schema}`. `max_tokens` is required by the API: `modelDefaults.max_tokens`
or 4096.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from . import media, reasoning
from .base import MAX_TOOL_ARGUMENT_CHARS, ChatMessage, ModelInfo, Reasoning, TextDelta, ToolCall, ToolSpec, Usage
from .http_stream import MAX_MODEL_PAGES, HttpProvider, StepMeter, StreamState, non_negative_int

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_RESERVED = ("model", "messages", "stream", "system", "tools")


class AnthropicProvider(HttpProvider):
    @property
    def url(self) -> str:
        return self.endpoint("v1/messages")

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._spec.api_key:
            headers["x-api-key"] = self._spec.api_key
        return headers

    def request_body(self, model: str, messages: list[ChatMessage],
                     tools: tuple[ToolSpec, ...] = ()) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        turns: list[dict] = []
        for m in messages:
            if m.role == "system":
                continue
            role = "assistant" if m.role == "assistant" else "user"
            if m.role == "tool" or m.tool_calls or m.reasoning:
                blocks = _blocks(m)
            else:
                content = media.anthropic_blocks(m)   # text, or text and images
                blocks = None if isinstance(content, str) else content
            if turns and turns[-1]["role"] == role:
                last = turns[-1]
                if blocks is None and isinstance(last["content"], str):
                    last["content"] += "\n\n" + m.content
                    continue
                if isinstance(last["content"], str):
                    last["content"] = [{"type": "text", "text": last["content"]}] if last["content"] else []
                last["content"] += blocks if blocks is not None else (
                    [{"type": "text", "text": m.content}] if m.content else [])
            else:
                turns.append({"role": role, "content": m.content if blocks is None else blocks})
        body["model"] = model
        if system:
            body["system"] = system
        body["messages"] = turns
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in tools]
        body["stream"] = True
        return reasoning.apply_anthropic(body, self._spec.type, model, self.reasoning_level)

    async def stream(
        self, model: str, messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = ()
    ) -> AsyncIterator[TextDelta | ToolCall | Reasoning | Usage]:
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.url, self.request_body(model, messages, tools),
                                    self._headers(), "/v1/messages", deadline)
        blocks: dict[int, dict] = {}      # open content blocks by index (tool_use, thinking)
        thinking: list[dict] = []
        state = StreamState()
        counts = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}
        seen_usage = False
        meter = StepMeter(self)
        events = self._sse(response, deadline, state)
        try:
            async for event in events:
                kind = event.event
                if kind == "ping" or not event.data:
                    continue
                data = self._json(event.data)
                kind = data.get("type", kind)
                if kind == "content_block_delta":
                    delta = data.get("delta")
                    if not isinstance(delta, dict):
                        continue
                    if delta.get("type") == "text_delta":
                        text = delta.get("text")
                        if isinstance(text, str) and text:
                            meter.text(len(text))
                            yield TextDelta(text)
                    else:
                        _block_delta(blocks.get(data.get("index")), delta, meter)
                elif kind == "content_block_start":
                    block = data.get("content_block")
                    if isinstance(block, dict) and block.get("type") in _KEPT_BLOCKS:
                        if block["type"] == "tool_use":
                            meter.call()
                        blocks[data.get("index")] = _open_block(block, meter)
                elif kind == "content_block_stop":
                    block = blocks.pop(data.get("index"), None)
                    if block is not None and block["type"] == "tool_use":
                        yield _tool_call(block)
                    elif block is not None:
                        thinking.append(_thinking(block))
                elif kind == "message_start":
                    message = data.get("message")
                    if isinstance(message, dict) and isinstance(message.get("usage"), dict):
                        seen_usage |= _merge_usage(counts, message["usage"])
                elif kind == "message_delta":
                    if isinstance(data.get("usage"), dict):
                        seen_usage |= _merge_usage(counts, data["usage"])
                    delta = data.get("delta")
                    if isinstance(delta, dict) and delta.get("stop_reason"):
                        state.finished = True
                elif kind == "message_stop":
                    state.finished = True
                    if thinking:
                        yield Reasoning(tuple(thinking))
                    if seen_usage:
                        yield _usage(counts)
                    await self._drain(events)
                    return
                elif kind == "error":
                    self._log_remote("error event in the stream", event.data)
                    err = data.get("error")
                    raise self._stream_error(err.get("type") if isinstance(err, dict) else None)
            if not state.finished:
                raise self._error("stream ended before message_stop (the reply was cut off)")
            if thinking:
                yield Reasoning(tuple(thinking))
            if seen_usage:
                yield _usage(counts)
        finally:
            await events.aclose()
            await response.aclose()

    async def list_models(self) -> list[ModelInfo]:
        models: list[ModelInfo] = []
        params: dict[str, Any] = {"limit": 1000}
        for _ in range(MAX_MODEL_PAGES):
            page = await self._get_json(self.endpoint("v1/models"), self._headers(),
                                        "/v1/models", params)
            for entry in page.get("data") or ():
                if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
                    name = entry.get("display_name")
                    models.append(ModelInfo(entry["id"], name if isinstance(name, str) and name
                                            else entry["id"]))
            last = page.get("last_id")
            if not page.get("has_more") or not isinstance(last, str) or not last:
                break
            params = {"limit": 1000, "after_id": last}
        return models


def _merge_usage(counts: dict[str, int], usage: dict) -> bool:
    """Take the counts `usage` carries (message_delta's are cumulative, so the latest wins)."""
    found = False
    for key in counts:
        if key in usage and usage[key] is not None:
            counts[key] = non_negative_int(usage[key])
            found = True
    return found


def _usage(counts: dict[str, int]) -> Usage:
    total = sum(counts.values())
    return Usage(input=counts["input_tokens"], output=counts["output_tokens"],
                 cache_read=counts["cache_read_input_tokens"],
                 cache_write=counts["cache_creation_input_tokens"], total=total)



_KEPT_BLOCKS = ("tool_use", "thinking", "redacted_thinking")


def _open_block(block: dict, meter: StepMeter) -> dict:
    kind = block["type"]
    for key in ("thinking", "signature", "data"):
        if isinstance(block.get(key), str):
            meter.text(len(block[key]))
    if kind == "tool_use":
        return {"type": kind, "id": str(block.get("id") or ""), "name": str(block.get("name") or ""),
                "json": [], "size": 0, "oversize": False}
    if kind == "thinking":
        return {"type": kind, "thinking": [str(block.get("thinking") or "")],
                "signature": str(block.get("signature") or "")}
    return {"type": kind, "data": str(block.get("data") or "")}


def _block_delta(block: dict | None, delta: dict, meter: StepMeter) -> None:
    if block is None:
        return
    kind = delta.get("type")
    for key in ("partial_json", "thinking", "signature"):
        if isinstance(delta.get(key), str):
            meter.text(len(delta[key]))
    if kind == "input_json_delta" and block["type"] == "tool_use" and not block["oversize"]:
        piece = delta.get("partial_json")
        if isinstance(piece, str):
            block["size"] += len(piece)
            if block["size"] > MAX_TOOL_ARGUMENT_CHARS:
                block["oversize"], block["json"] = True, []
            else:
                block["json"].append(piece)
    elif kind == "thinking_delta" and block["type"] == "thinking":
        if isinstance(delta.get("thinking"), str):
            block["thinking"].append(delta["thinking"])
    elif kind == "signature_delta" and block["type"] == "thinking":
        if isinstance(delta.get("signature"), str):
            block["signature"] += delta["signature"]


def _tool_call(block: dict) -> ToolCall:
    # An empty input streams no delta at all: the call's input is then {}.
    return ToolCall(block["id"], block["name"], "".join(block["json"]) or "{}", block["oversize"])


def _thinking(block: dict) -> dict:
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "".join(block["thinking"]), "signature": block["signature"]}
    return {"type": "redacted_thinking", "data": block["data"]}


def _blocks(m: ChatMessage) -> list[dict]:
    """A message as content blocks (tool steps and their results)."""
    if m.role == "tool":
        return [{"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content,
                 **({"is_error": True} if m.is_error else {})}]
    out: list[dict] = [dict(b) for b in m.reasoning]
    if m.content:
        out.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        out.append({"type": "tool_use", "id": call.id, "name": call.name,
                    "input": arguments if isinstance(arguments, dict) else {}})
    return out

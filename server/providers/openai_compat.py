"""Streamed chat completions from any OpenAI-compatible endpoint (OpenAI, OpenRouter, DeepSeek,
Groq, xAI, Ollama, custom).

One POST to `{base_url}/chat/completions` with `stream: true`; the reply arrives as server-sent
events (`data: {json}`, ending with `data: [DONE]`), parsed by httpx-sse (see http_stream.py for
timeouts and errors). Decisions worth knowing:

- The stream is complete at `[DONE]`. If it ends without `[DONE]` (EOF or a broken chunked
  body) after a choice reported a `finish_reason`, the reply is whole and we accept it (some
  proxies drop the terminator; at worst the usage chunk is lost). Without a finish_reason it
  is a ProviderError: the reply was cut.
- Usage is collected from every chunk that carries one (the last wins; Groq's `x_groq.usage`
  too) and yielded once, after the last delta, so a consumer never has to de-duplicate.
- A chunk carrying `error` (OpenRouter reports mid-stream failures that way) is a ProviderError
  with a fixed phrase; what the provider said goes to the log.
- The model list is `GET {base_url}/models` (`data[].id`, and `name` where OpenRouter gives one).
- Tools go in `tools` as `{type: "function", function: {name, description, parameters}}`. A call
  streams as `delta.tool_calls[]` pieces keyed by `index` (several indexes: parallel calls); the
  id and name come in the first piece, `function.arguments` is concatenated. The calls are
  yielded whole when the stream ends (after `finish_reason`), in index order. History: an
  assistant message carries `tool_calls` (content null when it said nothing), each result is a
  `role: "tool"` message with `tool_call_id`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from . import media, reasoning
from .base import MAX_TOOL_ARGUMENT_CHARS, ChatMessage, ModelInfo, TextDelta, ToolCall, ToolSpec, Usage
from .http_stream import HttpProvider, StepMeter, StreamState, non_negative_int

# Request fields the caller owns; model_defaults may never replace them.
_RESERVED = ("model", "messages", "stream", "tools")


class OpenAICompatProvider(HttpProvider):
    @property
    def url(self) -> str:
        return self.endpoint("chat/completions")

    def request_body(self, model: str, messages: list[ChatMessage],
                     tools: tuple[ToolSpec, ...] = ()) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        # Ask for the usage chunk; a stream_options given in the defaults is kept, but
        # include_usage is always on because meta.usage depends on it.
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        body["stream_options"] = {**options, "include_usage": True}
        body["model"] = model
        body["messages"] = [_wire_message(m) for m in messages]
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools]
        body["stream"] = True
        return reasoning.apply_openai(body, self._spec.type, model, self.reasoning_level)

    def _headers(self) -> dict[str, str]:
        if self._spec.api_key:
            return {"Authorization": f"Bearer {self._spec.api_key}"}
        return {}

    async def stream(
        self, model: str, messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = ()
    ) -> AsyncIterator[TextDelta | ToolCall | Usage]:
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.url, self.request_body(model, messages, tools),
                                    self._headers(), "/chat/completions", deadline)
        state = StreamState()
        usage: Usage | None = None
        meter = StepMeter(self)
        calls = _CallPieces(meter)
        events = self._sse(response, deadline, state)
        try:
            async for event in events:
                if event.data == "[DONE]":
                    for call in calls.whole():
                        yield call
                    if usage is not None:
                        yield usage
                    await self._drain(events)
                    return
                chunk = self._json(event.data)
                if chunk.get("error"):
                    raise self._chunk_error(chunk)
                if "usage" in chunk or "x_groq" in chunk:
                    usage = _usage(chunk) or usage
                for choice in chunk.get("choices") or ():
                    if not isinstance(choice, dict):
                        continue
                    if choice.get("finish_reason"):
                        state.finished = True
                    # Only the first choice is the reply (we never ask for n > 1).
                    if choice.get("index", 0) != 0:
                        continue
                    delta = choice.get("delta")
                    if not isinstance(delta, dict):
                        continue
                    text = delta.get("content")
                    if isinstance(text, str) and text:
                        meter.text(len(text))
                        yield TextDelta(text)
                    if delta.get("tool_calls"):
                        calls.add(delta["tool_calls"])
            if not state.finished:
                raise self._error("stream ended without [DONE] (the reply was cut off)")
            for call in calls.whole():
                yield call
            if usage is not None:
                yield usage
        finally:
            # Runs on success, error and cancellation alike; closing a half-read response
            # closes its connection, which is what aborts the request upstream.
            await events.aclose()
            await response.aclose()

    def _chunk_error(self, chunk: dict):  # noqa: ANN201
        self._log_remote("error in the stream", json.dumps(chunk.get("error"))[:2000])
        err = chunk["error"]
        kind = None
        if isinstance(err, dict):
            kind = err.get("type") or err.get("code")
            if isinstance(kind, int):
                return self._stream_error({429: "rate_limit_error", 500: "api_error",
                                           503: "UNAVAILABLE"}.get(kind))
        return self._stream_error(kind if isinstance(kind, str) else None)

    async def list_models(self) -> list[ModelInfo]:
        body = await self._get_json(self.endpoint("models"), self._headers(), "/models")
        models = []
        for entry in body.get("data") or ():
            if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
                name = entry.get("name")
                models.append(ModelInfo(entry["id"], name if isinstance(name, str) and name
                                        else entry["id"]))
        return models


def _usage(chunk: dict) -> Usage | None:
    raw = chunk.get("usage")
    if not isinstance(raw, dict):
        groq = chunk.get("x_groq")
        raw = groq.get("usage") if isinstance(groq, dict) else None
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details")
    cached = non_negative_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    # DeepSeek reports cache hits in its own field.
    cached = cached or non_negative_int(raw.get("prompt_cache_hit_tokens"))
    prompt = non_negative_int(raw.get("prompt_tokens"))
    completion = non_negative_int(raw.get("completion_tokens"))
    total = non_negative_int(raw.get("total_tokens")) or prompt + completion
    return Usage(input=prompt, output=completion, cache_read=cached, total=total)


def _wire_message(m: ChatMessage) -> dict:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {"role": "assistant", "content": m.content or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls]}
    return {"role": m.role, "content": media.openai_content(m)}   # text, and the message's images


class _CallPieces:
    """Tool calls assembled from `delta.tool_calls` pieces, by index (each new index and every
    piece of arguments counted by the step's meter)."""

    __slots__ = ("calls", "meter")

    def __init__(self, meter: StepMeter) -> None:
        self.calls: dict[int, dict] = {}
        self.meter = meter

    def add(self, pieces) -> None:  # noqa: ANN001 - whatever the provider sent
        if not isinstance(pieces, list):
            return
        for piece in pieces:
            if not isinstance(piece, dict):
                continue
            index = piece.get("index", len(self.calls))
            if not isinstance(index, int) or isinstance(index, bool):
                index = len(self.calls)
            call = self.calls.get(index)
            if call is None:
                self.meter.call()
                call = self.calls[index] = {"id": "", "name": "", "args": [], "size": 0, "oversize": False}
            if isinstance(piece.get("id"), str) and piece["id"]:
                call["id"] = piece["id"]
            function = piece.get("function")
            if not isinstance(function, dict):
                continue
            if isinstance(function.get("name"), str) and function["name"] and not call["name"]:
                call["name"] = function["name"]
            args = function.get("arguments")
            if isinstance(args, dict):   # some servers (Ollama) send the arguments parsed
                args = json.dumps(args)
            if isinstance(args, str) and args:
                self.meter.text(len(args))
            if isinstance(args, str) and args and not call["oversize"]:
                call["size"] += len(args)
                if call["size"] > MAX_TOOL_ARGUMENT_CHARS:
                    call["oversize"], call["args"] = True, []
                else:
                    call["args"].append(args)

    def whole(self) -> list[ToolCall]:
        out = [ToolCall(c["id"], c["name"], "".join(c["args"]) or "{}", c["oversize"])
               for _, c in sorted(self.calls.items())]
        self.calls.clear()
        return out

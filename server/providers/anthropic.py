"""Anthropic's Messages API, streamed (`POST {base}/v1/messages` with `stream: true`).

Events (https://docs.anthropic.com/en/api/messages-streaming): `message_start` (input usage),
`content_block_start`, `content_block_delta` (`text_delta` pieces are the reply; thinking and
tool deltas are not text and are skipped), `content_block_stop`, `message_delta` (stop reason,
cumulative output usage), `message_stop`, `ping`, and `error` (a mid-stream failure such as
`overloaded_error`). The reply is complete at `message_stop`; a stream that ends before it
without a stop reason was cut off.

Usage as the contract counts it (and as pi-ai does): `input` is `input_tokens` (which excludes
cached tokens), `cacheRead`/`cacheWrite` are `cache_read_input_tokens` /
`cache_creation_input_tokens`, `total` the sum of the four.

The system prompt goes in `system`; the Messages API wants user/assistant turns, so consecutive
messages of one role are joined. `max_tokens` is required by the API: `modelDefaults.max_tokens`
or 4096.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from . import media
from .base import ChatMessage, ModelInfo, TextDelta, Usage
from . import reasoning
from .http_stream import MAX_MODEL_PAGES, HttpProvider, StreamState, non_negative_int

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_RESERVED = ("model", "messages", "stream", "system")


class AnthropicProvider(HttpProvider):
    @property
    def url(self) -> str:
        return self.endpoint("v1/messages")

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._spec.api_key:
            headers["x-api-key"] = self._spec.api_key
        return headers

    def request_body(self, model: str, messages: list[ChatMessage]) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        turns: list[dict] = []
        for m in messages:
            if m.role == "system":
                continue
            role = "assistant" if m.role == "assistant" else "user"
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"] = media.anthropic_join(turns[-1]["content"], media.anthropic_blocks(m))
            else:
                turns.append({"role": role, "content": media.anthropic_blocks(m)})
        body["model"] = model
        if system:
            body["system"] = system
        body["messages"] = turns
        body["stream"] = True
        return reasoning.apply_anthropic(body, self._spec.type, model, self.reasoning_level)

    async def stream(
        self, model: str, messages: list[ChatMessage]
    ) -> AsyncIterator[TextDelta | Usage]:
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.url, self.request_body(model, messages),
                                    self._headers(), "/v1/messages", deadline)
        state = StreamState()
        counts = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}
        seen_usage = False
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
                    if isinstance(delta, dict) and delta.get("type") == "text_delta":
                        text = delta.get("text")
                        if isinstance(text, str) and text:
                            yield TextDelta(text)
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


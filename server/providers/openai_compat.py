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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from . import media
from .base import ChatMessage, ModelInfo, TextDelta, Usage
from . import reasoning
from .http_stream import HttpProvider, StreamState, non_negative_int

# Request fields the caller owns; model_defaults may never replace them.
_RESERVED = ("model", "messages", "stream")


class OpenAICompatProvider(HttpProvider):
    @property
    def url(self) -> str:
        return self.endpoint("chat/completions")

    def request_body(self, model: str, messages: list[ChatMessage]) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        # Ask for the usage chunk; a stream_options given in the defaults is kept, but
        # include_usage is always on because meta.usage depends on it.
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        body["stream_options"] = {**options, "include_usage": True}
        body["model"] = model
        body["messages"] = [{"role": m.role, "content": media.openai_content(m)} for m in messages]
        body["stream"] = True
        return reasoning.apply_openai(body, self._spec.type, model, self.reasoning_level)

    def _headers(self) -> dict[str, str]:
        if self._spec.api_key:
            return {"Authorization": f"Bearer {self._spec.api_key}"}
        return {}

    async def stream(
        self, model: str, messages: list[ChatMessage]
    ) -> AsyncIterator[TextDelta | Usage]:
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.url, self.request_body(model, messages),
                                    self._headers(), "/chat/completions", deadline)
        state = StreamState()
        usage: Usage | None = None
        events = self._sse(response, deadline, state)
        try:
            async for event in events:
                if event.data == "[DONE]":
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
                    text = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(text, str) and text:
                        yield TextDelta(text)
            if not state.finished:
                raise self._error("stream ended without [DONE] (the reply was cut off)")
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

"""Turns of an `authMode: 'subscription'` OpenAI provider: the OpenAI Responses API over SSE at
the ChatGPT backend, as the reference sends them through pi-ai's `openai-codex` provider.

One POST to `{base}/codex/responses` (base: `--subscription-base-url`, the reference's
`https://chatgpt.com/backend-api`) with the access token as a bearer, the ChatGPT account id of
its JWT claim as `chatgpt-account-id`, `OpenAI-Beta: responses=experimental` and
`originator: pi`. The body: `model`, `instructions` (the system prompt), `input` items
(`message`s, `function_call`s and `function_call_output`s), `tools` as
`{type: "function", name, description, parameters}`, `store: false`, `stream: true`.

Events read: `response.output_text.delta` (the reply, in order), `response.output_item.done`
with a `function_call` item (a call, whole), `response.completed` (usage; the end), and
`response.failed` / `error` (a ProviderError with a fixed phrase; what was said goes to the log).
The credentials come from `credentials()` before each step, so an expiring token is refreshed
first (server/runtime/subscription_tokens.py); the token is never in an error or a log line.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .base import MAX_TOOL_ARGUMENT_CHARS, ChatMessage, ModelInfo, ProviderError, ProviderSpec, TextDelta, ToolCall, ToolSpec, Usage
from .http_stream import HttpProvider, StepMeter, StreamState, non_negative_int

# The models the reference offers a ChatGPT sign-in (its SUBSCRIPTION_CODEX_MODELS, static: the
# backend lists none).
MODELS = ("gpt-5.5", "gpt-5.4", "gpt-5.4-mini", "gpt-5.3-codex", "gpt-5.2")
_RESERVED = ("model", "instructions", "input", "stream", "store", "tools")

Credentials = Callable[[], Awaitable[tuple[str, str]]]   # () -> (access token, ChatGPT account id)


class CodexProvider(HttpProvider):
    def __init__(self, spec: ProviderSpec, client, credentials: Credentials, **kw) -> None:  # noqa: ANN001
        super().__init__(spec, client, **kw)
        self.name = "openai"
        self._credentials = credentials
        self._access: str | None = None

    def _error(self, what: str, *, status: int | None = None):  # noqa: ANN202
        # The subscription's token is this provider's secret: scrubbed from whatever is raised.
        return ProviderError(f"{self._where}: {what}", secret=self._access, status=status)

    def request_body(self, model: str, messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = ()) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        body["model"] = model
        body["instructions"] = "\n\n".join(m.content for m in messages if m.role == "system")
        body["input"] = [item for m in messages if m.role != "system" for item in _items(m)]
        if tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.parameters, "strict": None} for t in tools]
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = True
        if self.reasoning_level:
            body["reasoning"] = {"effort": self.reasoning_level, "summary": "auto"}
        body["text"] = {"verbosity": "medium"}
        body["store"] = False
        body["stream"] = True
        return body

    async def stream(self, model: str, messages: list[ChatMessage],
                     tools: tuple[ToolSpec, ...] = ()) -> AsyncIterator[TextDelta | ToolCall | Usage]:
        access, account = await self._credentials()
        self._access = access
        headers = {"Authorization": f"Bearer {access}", "chatgpt-account-id": account,
                   "OpenAI-Beta": "responses=experimental", "originator": "pi"}
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.endpoint("codex/responses"), self.request_body(model, messages, tools),
                                    headers, "/codex/responses", deadline)
        state = StreamState()
        meter = StepMeter(self)
        events = self._sse(response, deadline, state)
        usage: Usage | None = None
        try:
            async for event in events:
                if not event.data or event.data == "[DONE]":
                    continue
                data = self._json(event.data)
                kind = data.get("type") or event.event
                if kind == "response.output_text.delta":
                    text = data.get("delta")
                    if isinstance(text, str) and text:
                        meter.text(len(text))
                        yield TextDelta(text)
                elif kind == "response.output_item.done":
                    call = self._call(data.get("item"), meter)
                    if call is not None:
                        yield call
                elif kind in ("response.completed", "response.done"):
                    state.finished = True
                    usage = _usage(data.get("response"))
                    await self._drain(events)
                    break
                elif kind in ("response.failed", "error", "response.incomplete"):
                    self._log_remote(f"{kind} in the stream", json.dumps(data)[:2000])
                    err = data.get("error") or (data.get("response") or {}).get("error") or {}
                    code = err.get("code") or err.get("type") if isinstance(err, dict) else None
                    raise self._stream_error(code if isinstance(code, str) else None)
            if not state.finished:
                raise self._error("stream ended without response.completed (the reply was cut off)")
            if usage is not None:
                yield usage
        finally:
            await events.aclose()  # type: ignore[attr-defined]  # (an async generator)
            await response.aclose()

    def _call(self, item: Any, meter: StepMeter) -> ToolCall | None:
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return None
        meter.call()
        args = item.get("arguments")
        args = args if isinstance(args, str) else "{}"
        meter.text(len(args))
        call_id, name = item.get("call_id"), item.get("name")
        call_id = call_id if isinstance(call_id, str) else ""
        name = name if isinstance(name, str) else ""
        if len(args) > MAX_TOOL_ARGUMENT_CHARS:
            return ToolCall(call_id, name, "", oversize=True)
        return ToolCall(call_id, name, args or "{}")

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(m, m) for m in MODELS]


def _items(m: ChatMessage) -> list[dict]:
    if m.role == "tool":
        return [{"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}]
    if m.role == "assistant":
        items: list[dict] = []
        if m.content:
            items.append({"type": "message", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": m.content, "annotations": []}]})
        items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                  for c in m.tool_calls]
        return items
    return [{"role": "user", "content": [{"type": "input_text", "text": m.content}]}]


def _usage(response: Any) -> Usage | None:
    raw = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(raw, dict):
        return None
    details = raw.get("input_tokens_details")
    cached = non_negative_int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    prompt, output = non_negative_int(raw.get("input_tokens")), non_negative_int(raw.get("output_tokens"))
    return Usage(input=prompt, output=output, cache_read=cached,
                 total=non_negative_int(raw.get("total_tokens")) or prompt + output)

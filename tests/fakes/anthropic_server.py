"""A fake Anthropic Messages API on a real 127.0.0.1 socket.

`POST /v1/messages` with `stream: true` answers with the documented event stream
(https://docs.anthropic.com/en/api/messages-streaming): `message_start`, `content_block_start`,
`ping`, `content_block_delta` (`text_delta`) per chunk, `content_block_stop`, `message_delta`
(stop reason and usage), `message_stop`; a mid-stream failure is an `error` event. Requests must
carry `anthropic-version`, and `x-api-key` when the fake has a key (401 otherwise, with
Anthropic's error JSON). `GET /v1/models` lists models, paged with `has_more`/`last_id`.

    async with FakeAnthropic(Script(chunks=["Hel", "lo"]), key=KEY) as fake:
        ... ProviderSpec("anthropic", base_url=fake.base_url, api_key=KEY) ...
"""

from __future__ import annotations

import json
from typing import Any

from .loopback import RecordedRequest
from .sse_base import FakeSSEServer, Script, arguments_text, split_words

DEFAULT_USAGE = {"input_tokens": 11, "output_tokens": 5, "cache_read_input_tokens": 7,
                 "cache_creation_input_tokens": 3}
MODELS = [
    {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
     "created_at": "2025-09-29T00:00:00Z"},
    {"type": "model", "id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5",
     "created_at": "2025-10-01T00:00:00Z"},
    {"type": "model", "id": "claude-opus-4-1", "display_name": "Claude Opus 4.1",
     "created_at": "2025-08-05T00:00:00Z"},
]
PAGE = 2  # models per page, so the client has to follow has_more


def _event(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class FakeAnthropic(FakeSSEServer):
    def _route(self, request: RecordedRequest) -> tuple[str, Any, Any]:
        path, _, query = request.path.partition("?")
        if request.headers.get("anthropic-version") is None:
            return "json", 400, _error("invalid_request_error", "anthropic-version header is required")
        if self.key is not None and request.headers.get("x-api-key") != self.key:
            return "json", 401, _error("authentication_error", "invalid x-api-key")
        if path == "/v1/messages" and request.method == "POST":
            body = request.body if isinstance(request.body, dict) else {}
            if body.get("stream") is not True or "max_tokens" not in body:
                return "json", 400, _error("invalid_request_error", "stream and max_tokens")
            problem = _thinking_problem(body)
            if problem:
                return "json", 400, _error("invalid_request_error", problem)
            return "stream", None, None
        if path == "/v1/models" and request.method == "GET":
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            start = 0
            if "after_id" in params:
                start = next(i for i, m in enumerate(MODELS) if m["id"] == params["after_id"]) + 1
            page = MODELS[start:start + PAGE]
            return "json", 200, {"data": page, "has_more": start + PAGE < len(MODELS),
                                 "first_id": page[0]["id"], "last_id": page[-1]["id"]}
        return "json", 404, _error("not_found_error", f"no route {path}")

    def _error_json(self, script: Script) -> str:
        kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}.get(
            script.status, "api_error")
        return json.dumps(_error(kind, script.error_message))

    def _error_event(self, script: Script) -> bytes:
        return _event("error", _error("overloaded_error", script.error_message))

    def _events(self, script: Script, request: RecordedRequest) -> list[tuple[bytes, bool]]:
        body = request.body
        usage = dict(DEFAULT_USAGE if script.usage is None else script.usage)
        pieces = list(script.chunks)
        if script.echo:
            last = next((m for m in reversed(body["messages"]) if m["role"] == "user"), None)
            content = last["content"] if last else ""
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            pieces = split_words("echo: " + content)
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
        events = [
            (_event("message_start", {"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                "model": body.get("model"), "stop_reason": None, "stop_sequence": None,
                "usage": {**start_usage, "output_tokens": 1}}}), False),
            (_event("content_block_start", {"type": "content_block_start", "index": 0,
                                            "content_block": {"type": "text", "text": ""}}), False),
            (_event("ping", {"type": "ping"}), False),
        ]
        index = 0
        thinking = script.thinking if script.thinking is not None else (THINKING_TEXT if "thinking" in body else None)
        if thinking is not None:   # extended thinking streams first, in a signed thinking block
            events[1:2] = [
                (_event("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "thinking", "thinking": ""}}), False),
                (_event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "thinking_delta", "thinking": thinking}}), False),
                (_event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "signature_delta", "signature": "sig-" + str(len(thinking))}}), False),
                (_event("content_block_stop", {"type": "content_block_stop", "index": 0}), False),
                (_event("content_block_start", {"type": "content_block_start", "index": 1,
                                                "content_block": {"type": "text", "text": ""}}), False)]
            index = 1
        events += [(_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "text_delta", "text": p}}), True)
                   for p in pieces]
        events.append((_event("content_block_stop", {"type": "content_block_stop", "index": index}),
                       False))
        for call in script.tool_calls:
            index += 1
            args = arguments_text(call)
            events.append((_event("content_block_start", {"type": "content_block_start", "index": index,
                                                          "content_block": {"type": "tool_use", "id": call["id"],
                                                                            "name": call["name"], "input": {}}}), False))
            half = len(args) // 2
            for piece in ((args[:half],) if script.cut_tool_call else (args[:half], args[half:])):
                events.append((_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": piece}}), False))
            if script.cut_tool_call:
                return events
            events.append((_event("content_block_stop", {"type": "content_block_stop", "index": index}), False))
        if script.stop:
            reason = "tool_use" if script.tool_calls else "end_turn"
            events.append((_event("message_delta", {
                "type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)}}), False))
            events.append((_event("message_stop", {"type": "message_stop"}), False))
        return events


THINKING_TEXT = "Thinking it over, step by step."


def _thinking_problem(body: dict) -> str | None:
    """What the Messages API says of a `thinking` field it refuses (None when it takes it)."""
    thinking = body.get("thinking")
    if thinking is None:
        return None
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled" or not isinstance(budget, int):
        return "thinking: expected {type: enabled, budget_tokens}"
    if budget < 1024:
        return "thinking.budget_tokens: must be at least 1024"
    if budget >= body["max_tokens"]:
        return "max_tokens must be greater than thinking.budget_tokens"
    if "temperature" in body or "top_k" in body:
        return "temperature and top_k may not be set with thinking"
    return None


def _error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}

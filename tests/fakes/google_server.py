"""A fake Gemini API on a real 127.0.0.1 socket.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` answers with SSE `data:` chunks of
`GenerateContentResponse` (https://ai.google.dev/api/generate-content): each chunk has
`candidates[0].content.parts[].text` (role `model`) and a cumulative `usageMetadata`; the last
has `finishReason: STOP`. A mid-stream failure is a chunk with `error` (`{code, message,
status}`). The key must come in `x-goog-api-key` when the fake has one (400 API_KEY_INVALID
otherwise, as Google answers). `GET /v1beta/models` lists models, paged with `nextPageToken`,
an embedding model among them.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from .loopback import RecordedRequest
from .sse_base import FakeSSEServer, Script, split_words

DEFAULT_USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 4, "totalTokenCount": 22,
                 "cachedContentTokenCount": 2, "thoughtsTokenCount": 6}
MODELS = [
    {"name": "models/gemini-2.5-flash", "displayName": "Gemini 2.5 Flash",
     "supportedGenerationMethods": ["generateContent", "countTokens"]},
    {"name": "models/text-embedding-004", "displayName": "Text Embedding 004",
     "supportedGenerationMethods": ["embedContent"]},
    {"name": "models/gemini-2.5-pro", "displayName": "Gemini 2.5 Pro",
     "supportedGenerationMethods": ["generateContent"]},
]
PAGE = 2
_STREAM_SUFFIX = ":streamGenerateContent"


def _data(value: dict) -> bytes:
    return f"data: {json.dumps(value)}\r\n\r\n".encode()   # Google ends SSE lines with CRLF


class FakeGoogle(FakeSSEServer):
    def _route(self, request: RecordedRequest) -> tuple[str, Any, Any]:
        path, _, query = request.path.partition("?")
        if self.key is not None and request.headers.get("x-goog-api-key") != self.key:
            return "json", 400, _error(400, "API key not valid. Please pass a valid API key.",
                                       "INVALID_ARGUMENT")
        if path.startswith("/v1beta/models/") and path.endswith(_STREAM_SUFFIX):
            if request.method != "POST" or "alt=sse" not in query.split("&"):
                return "json", 400, _error(400, "alt=sse is required here", "INVALID_ARGUMENT")
            body = request.body if isinstance(request.body, dict) else {}
            if not body.get("contents"):
                return "json", 400, _error(400, "contents is not specified", "INVALID_ARGUMENT")
            problem = _thinking_problem(body)
            if problem:
                return "json", 400, _error(400, problem, "INVALID_ARGUMENT")
            return "stream", None, None
        if path == "/v1beta/models" and request.method == "GET":
            params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            start = int(params.get("pageToken", "0") or 0)
            page = {"models": MODELS[start:start + PAGE]}
            if start + PAGE < len(MODELS):
                page["nextPageToken"] = str(start + PAGE)
            return "json", 200, page
        return "json", 404, _error(404, f"no route {path}", "NOT_FOUND")

    def model_of(self, request: RecordedRequest) -> str:
        path = request.path.partition("?")[0]
        return unquote(path.removeprefix("/v1beta/models/").removesuffix(_STREAM_SUFFIX))

    def _error_json(self, script: Script) -> str:
        status = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(script.status, "INTERNAL")
        return json.dumps(_error(script.status, script.error_message, status))

    def _error_event(self, script: Script) -> bytes:
        return _data(_error(503, script.error_message, "UNAVAILABLE"))

    def _events(self, script: Script, request: RecordedRequest) -> list[tuple[bytes, bool]]:
        body = request.body
        usage = dict(DEFAULT_USAGE if script.usage is None else script.usage)
        pieces = list(script.chunks)
        if script.echo:
            last = next((c for c in reversed(body["contents"]) if c["role"] == "user"), None)
            pieces = split_words("echo: " + ("".join(p.get("text", "") for p in last["parts"]) if last else ""))
        events = []
        thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        if thinking.get("thinkingBudget", 0) or thinking.get("thinkingLevel"):
            # Thoughts come first, as parts marked `thought`: never the answer.
            events.append((_data({"candidates": [{"content": {"parts": [
                {"text": THINKING_TEXT, "thought": True}], "role": "model"}, "index": 0}],
                "usageMetadata": usage}), False))
        calls = list(script.tool_calls)
        for i, piece in enumerate(pieces):
            candidate: dict = {"content": {"parts": [{"text": piece}], "role": "model"}, "index": 0}
            if i == len(pieces) - 1 and script.stop and not calls:
                candidate["finishReason"] = "STOP"
            events.append((_data({"candidates": [candidate], "usageMetadata": usage,
                                  "modelVersion": self.model_of(request)}), True))
        if calls:
            # Gemini sends each call whole, as a part (with a thought signature when thinking).
            parts = []
            for call in calls:
                args = call.get("arguments", {})
                part = {"functionCall": {"name": call["name"], "args": args if isinstance(args, dict) else {}}}
                if call.get("signature"):
                    part["thoughtSignature"] = call["signature"]
                parts.append(part)
            candidate = {"content": {"parts": parts, "role": "model"}, "index": 0}
            if script.stop and not script.cut_tool_call:
                candidate["finishReason"] = "STOP"
            events.append((_data({"candidates": [candidate], "usageMetadata": usage}), False))
            return events
        if not pieces and script.stop:
            events.append((_data({"candidates": [{"content": {"parts": [], "role": "model"},
                                                  "finishReason": "STOP", "index": 0}],
                                  "usageMetadata": usage}), False))
        return events


THINKING_TEXT = "Thinking it over, step by step."
THINKING_LEVELS = ("minimal", "low", "medium", "high")


def _thinking_problem(body: dict) -> str | None:
    """What the Gemini API says of a thinkingConfig it refuses (None when it takes it)."""
    thinking = (body.get("generationConfig") or {}).get("thinkingConfig")
    if thinking is None:
        return None
    budget, level = thinking.get("thinkingBudget"), thinking.get("thinkingLevel")
    if budget is not None and level is not None:
        return "thinkingBudget and thinkingLevel cannot both be set"
    if budget is not None and not (isinstance(budget, int) and 0 <= budget <= 32768):
        return "thinkingBudget must be an integer from 0 to 32768"
    if level is not None and level not in THINKING_LEVELS:
        return f"thinkingLevel must be one of {', '.join(THINKING_LEVELS)}"
    return None


def _error(code: int, message: str, status: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}

"""Google's Gemini API, streamed
(`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`, key in `x-goog-api-key`).

Each SSE `data:` event is a `GenerateContentResponse`
(https://ai.google.dev/api/generate-content): the reply is the text of
`candidates[0].content.parts[]` (parts marked `thought` are the model's reasoning, not the reply,
and are skipped); `usageMetadata` is cumulative, so the last one wins; a candidate's
`finishReason` says the reply is complete. The stream simply ends (no terminator), so an end
without any finishReason means the reply was cut off. A chunk with `error` is a mid-stream failure
and a `promptFeedback.blockReason` without candidates is a refused prompt.

Usage as the contract counts it (and as pi-ai does): `cacheRead` is `cachedContentTokenCount`,
`input` the prompt tokens without those, `output` candidates plus thoughts tokens, `total`
`totalTokenCount`.

The key goes in the `x-goog-api-key` header, never in the URL (URLs get logged).

Tools go in `tools[0].functionDeclarations` with the schema as `parametersJsonSchema` (full JSON
Schema; the older `parameters` field refuses `additionalProperties`). A call arrives whole as a
`functionCall` part (`{name, args, id?}`), possibly with a `thoughtSignature` that must be handed
back on that part in the next step (Gemini 2.5+ with thinking); results go back as
`functionResponse` parts of a user turn, `response: {output}` or `{error}`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from . import media, reasoning
from .base import MAX_TOOL_ARGUMENT_CHARS, ChatMessage, ModelInfo, TextDelta, ToolCall, ToolSpec, Usage
from .http_stream import MAX_MODEL_PAGES, HttpProvider, StepMeter, StreamState, non_negative_int

_RESERVED = ("contents", "systemInstruction", "system_instruction", "tools")


class GoogleProvider(HttpProvider):
    def url_for(self, model: str) -> str:
        model = model.removeprefix("models/")
        return self.endpoint(f"v1beta/models/{quote(model, safe='-._~')}:streamGenerateContent", {"alt": "sse"})

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._spec.api_key} if self._spec.api_key else {}

    def request_body(self, model: str, messages: list[ChatMessage],
                     tools: tuple[ToolSpec, ...] = ()) -> dict[str, Any]:
        # modelDefaults are request fields (generationConfig, safetySettings, ...).
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        contents: list[dict] = []
        for m in messages:
            if m.role == "system":
                continue
            role = "model" if m.role == "assistant" else "user"
            parts = _parts(m)
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        body["contents"] = contents
        if tools:
            body["tools"] = [{"functionDeclarations": [
                {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
                for t in tools]}]
        return reasoning.apply_google(body, self._spec.type, model, self.reasoning_level)

    async def stream(
        self, model: str, messages: list[ChatMessage], tools: tuple[ToolSpec, ...] = ()
    ) -> AsyncIterator[TextDelta | ToolCall | Usage]:
        deadline = asyncio.get_running_loop().time() + self._first_token_timeout
        response = await self._open(self.url_for(model), self.request_body(model, messages, tools),
                                    self._headers(), ":streamGenerateContent", deadline)
        state = StreamState()
        usage: Usage | None = None
        calls: list[ToolCall] = []   # yielded at the end: a stream cut after one is no reply
        meter = StepMeter(self)
        events = self._sse(response, deadline, state)
        try:
            async for event in events:
                if not event.data:
                    continue
                chunk = self._json(event.data)
                if chunk.get("error"):
                    self._log_remote("error in the stream", event.data)
                    err = chunk["error"]
                    raise self._stream_error(err.get("status") if isinstance(err, dict) else None)
                if isinstance(chunk.get("usageMetadata"), dict):
                    usage = _usage(chunk["usageMetadata"])
                candidates = chunk.get("candidates")
                if not candidates:
                    feedback = chunk.get("promptFeedback")
                    if isinstance(feedback, dict) and feedback.get("blockReason"):
                        self._log_remote("prompt blocked", event.data)
                        raise self._error("the provider blocked the prompt")
                    continue
                candidate = candidates[0] if isinstance(candidates, list) else None
                if not isinstance(candidate, dict):
                    continue
                if candidate.get("finishReason"):
                    state.finished = True
                content = candidate.get("content")
                for part in (content.get("parts") or ()) if isinstance(content, dict) else ():
                    if not isinstance(part, dict):
                        continue
                    if isinstance(part.get("functionCall"), dict):
                        meter.call()
                        call = _tool_call(part)
                        meter.text(MAX_TOOL_ARGUMENT_CHARS if call.oversize else len(call.arguments))
                        calls.append(call)
                    elif not part.get("thought"):
                        text = part.get("text")
                        if isinstance(text, str) and text:
                            meter.text(len(text))
                            yield TextDelta(text)
            if not state.finished:
                raise self._error("stream ended without a finishReason (the reply was cut off)")
            for call in calls:
                yield call
            if usage is not None:
                yield usage
        finally:
            await events.aclose()
            await response.aclose()

    async def list_models(self) -> list[ModelInfo]:
        models: list[ModelInfo] = []
        params: dict[str, Any] = {"pageSize": 1000}
        for _ in range(MAX_MODEL_PAGES):
            page = await self._get_json(self.endpoint("v1beta/models"), self._headers(),
                                        "/v1beta/models", params)
            for entry in page.get("models") or ():
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    continue
                methods = entry.get("supportedGenerationMethods")
                if isinstance(methods, list) and "generateContent" not in methods:
                    continue   # embeddings and the like cannot chat
                model_id = entry["name"].removeprefix("models/")
                name = entry.get("displayName")
                if model_id:
                    models.append(ModelInfo(model_id, name if isinstance(name, str) and name
                                            else model_id))
            token = page.get("nextPageToken")
            if not isinstance(token, str) or not token:
                break
            params = {"pageSize": 1000, "pageToken": token}
        return models


def _usage(meta: dict) -> Usage:
    prompt = non_negative_int(meta.get("promptTokenCount"))
    cached = non_negative_int(meta.get("cachedContentTokenCount"))
    output = (non_negative_int(meta.get("candidatesTokenCount"))
              + non_negative_int(meta.get("thoughtsTokenCount")))
    total = non_negative_int(meta.get("totalTokenCount")) or prompt + output
    return Usage(input=max(0, prompt - cached), output=output, cache_read=cached, total=total)


def _tool_call(part: dict) -> ToolCall:
    call = part["functionCall"]
    args = call.get("args")
    text = json.dumps(args if args is not None else {})
    oversize = len(text) > MAX_TOOL_ARGUMENT_CHARS
    extra = {"thoughtSignature": part["thoughtSignature"]} if isinstance(part.get("thoughtSignature"), str) else {}
    return ToolCall(str(call.get("id") or ""), str(call.get("name") or ""),
                    "{}" if oversize else text, oversize, extra)


def _parts(m: ChatMessage) -> list[dict]:
    if m.role == "tool":
        try:
            value = json.loads(m.content)
        except ValueError:
            value = m.content
        response = {"error": value} if m.is_error else {"output": value}
        return [{"functionResponse": {"name": m.name, "response": response}}]
    if not m.tool_calls:
        return media.google_parts(m)   # text, and the message's images
    parts: list[dict] = [{"text": m.content}] if m.content else []
    for call in m.tool_calls:
        try:
            args = json.loads(call.arguments)
        except ValueError:
            args = None
        part: dict = {"functionCall": {"name": call.name, "args": args if isinstance(args, dict) else {}}}
        if "thoughtSignature" in call.extra:
            part["thoughtSignature"] = call.extra["thoughtSignature"]
        parts.append(part)
    return parts

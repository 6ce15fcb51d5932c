"""Streamed chat completions from any OpenAI-compatible endpoint (OpenAI, OpenRouter, DeepSeek,
Groq, xAI, Ollama, custom).

One POST to `{base_url}/chat/completions` with `stream: true`; the reply arrives as server-sent
events (`data: {json}` lines, ending with `data: [DONE]`). Decisions worth knowing:

- Timeouts are ours, not httpx's (the request runs with httpx timeouts off, so a shared client's
  5 s default cannot cut a slow model short): `first_token_timeout` bounds everything from
  connecting to the first `data:` event; `idle_timeout` bounds each wait for the next one.
  SSE comments (OpenRouter's `: OPENROUTER PROCESSING` keep-alives) do not count as progress,
  so a model that never starts still fails on time. The time the caller spends between pulls
  does not count against the provider.
- The stream is complete at `[DONE]`. If it ends without `[DONE]` (EOF or a broken chunked
  body) after a choice reported a `finish_reason`, the reply is whole and we accept it (some
  proxies drop the terminator; at worst the usage chunk is lost). Without a finish_reason it
  is a ProviderError: the reply was cut.
- Usage is collected from every chunk that carries one (the last wins; Groq's `x_groq.usage`
  too) and yielded once, after the last delta, so a consumer never has to de-duplicate.
- A chunk carrying `error` (OpenRouter reports mid-stream failures that way) is a ProviderError.
- Errors are raised `from None`, so tracebacks do not print the httpx exception (it holds the
  request, and with it the Authorization header). The useful part of the cause is put into
  the message instead.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx

from .base import ChatMessage, ProviderError, ProviderSpec, TextDelta, Usage, scrub

ERROR_EXCERPT_CHARS = 300
# How much of an error body we read at most: enough for any JSON error, never a whole page.
_ERROR_BODY_LIMIT = 8192
# After [DONE] the body should end at once; reading to its end lets httpx reuse the
# connection, but a server that keeps it open must not hold the reply hostage.
_DRAIN_AFTER_DONE = 0.5
# Request fields the caller owns; model_defaults may never replace them.
_RESERVED = ("model", "messages", "stream")


class OpenAICompatProvider:
    def __init__(
        self,
        spec: ProviderSpec,
        client: httpx.AsyncClient,
        *,
        first_token_timeout: float = 60.0,
        idle_timeout: float = 60.0,
    ) -> None:
        if not spec.base_url:
            raise ProviderError(f"provider {spec.type} has no base URL")
        self.name = spec.type
        self._spec = spec
        self._client = client
        self.url = spec.base_url.rstrip("/") + "/chat/completions"
        self._first_token_timeout = first_token_timeout
        self._idle_timeout = idle_timeout
        self._where = f"provider {spec.type} at {_display_url(spec.base_url)}"

    # -- request ---------------------------------------------------------------------------

    def request_body(self, model: str, messages: list[ChatMessage]) -> dict[str, Any]:
        body = {k: v for k, v in self._spec.model_defaults.items() if k not in _RESERVED}
        # Ask for the usage chunk; a stream_options given in the defaults is kept, but
        # include_usage is always on because meta.usage depends on it.
        options = body.get("stream_options")
        options = options if isinstance(options, dict) else {}
        body["stream_options"] = {**options, "include_usage": True}
        body["model"] = model
        body["messages"] = [{"role": m.role, "content": m.content} for m in messages]
        body["stream"] = True
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._spec.api_key:
            headers["Authorization"] = f"Bearer {self._spec.api_key}"
        return headers

    def _error(self, what: str, *, status: int | None = None) -> ProviderError:
        return ProviderError(f"{self._where}: {what}", secret=self._spec.api_key, status=status)

    # -- stream ----------------------------------------------------------------------------

    async def stream(
        self, model: str, messages: list[ChatMessage]
    ) -> AsyncIterator[TextDelta | Usage]:
        loop = asyncio.get_running_loop()
        first_deadline = loop.time() + self._first_token_timeout
        request = self._client.build_request(
            "POST",
            self.url,
            json=self.request_body(model, messages),
            headers=self._headers(),
            timeout=httpx.Timeout(None),
        )
        response: httpx.Response | None = None
        try:
            try:
                async with asyncio.timeout_at(first_deadline):
                    response = await self._client.send(request, stream=True)
            except TimeoutError:
                raise self._first_token_error() from None
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, started=False) from None

            if not response.is_success:
                raise await self._status_error(response)
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                excerpt = await self._body_excerpt(response)
                raise self._error(
                    f"expected a server-sent event stream but got Content-Type "
                    f"{content_type or '(none)'}: {excerpt}"
                )

            lines = response.aiter_lines()
            events = self._events(lines, first_deadline)
            async with aclosing(lines), aclosing(events):
                async for item in events:
                    yield item
        finally:
            # Runs on success, error and cancellation alike; closing a half-read response
            # closes its connection, which is what aborts the request upstream.
            if response is not None:
                await response.aclose()

    async def _events(
        self, lines: AsyncIterator[str], first_deadline: float
    ) -> AsyncIterator[TextDelta | Usage]:
        """Turn SSE lines into deltas and one final usage, enforcing the timeouts."""
        loop = asyncio.get_running_loop()
        usage: Usage | None = None
        finished = False  # a choice reported finish_reason
        seen_data = False
        deadline: float | None = first_deadline
        while True:
            if deadline is None:
                deadline = loop.time() + self._idle_timeout
            try:
                async with asyncio.timeout_at(deadline):
                    line = await anext(lines)
            except StopAsyncIteration:
                break
            except TimeoutError:
                if not seen_data:
                    raise self._first_token_error() from None
                raise self._error(
                    f"no data for {_seconds(self._idle_timeout)} in the middle of the stream"
                ) from None
            except httpx.HTTPError as exc:
                if finished:
                    break
                raise self._transport_error(exc, started=True) from None

            if not line.startswith("data:"):
                continue  # blank separators, comments (keep-alives), event:/id:/retry: fields
            payload = line[5:].strip()
            seen_data = True
            deadline = None  # the next wait starts when the caller asks for more
            if payload == "[DONE]":
                if usage is not None:
                    yield usage
                await _drain(lines)
                return
            chunk = self._parse_chunk(payload)
            if "usage" in chunk or "x_groq" in chunk:
                usage = _usage(chunk) or usage
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                if choice.get("finish_reason"):
                    finished = True
                # Only the first choice is the reply (we never ask for n > 1).
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta")
                text = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(text, str) and text:
                    yield TextDelta(text)

        if not finished:
            raise self._error("stream ended without [DONE] (the reply was cut off)")
        if usage is not None:
            yield usage

    def _parse_chunk(self, payload: str) -> dict:
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise self._error(f"malformed JSON in stream chunk: {_excerpt(payload)}") from None
        if not isinstance(chunk, dict):
            raise self._error(f"stream chunk is not a JSON object: {_excerpt(payload)}")
        if chunk.get("error"):
            raise self._error(f"error in stream: {_excerpt(_error_text(chunk) or payload)}")
        return chunk

    # -- errors ----------------------------------------------------------------------------

    def _first_token_error(self) -> ProviderError:
        return self._error(f"no first token within {_seconds(self._first_token_timeout)}")

    def _transport_error(self, exc: httpx.HTTPError, *, started: bool) -> ProviderError:
        if isinstance(exc, httpx.ConnectError):
            return self._error(_connect_failure(exc))
        if started and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return self._error(
                f"stream ended without [DONE]: connection broken mid-stream ({_describe(exc)})"
            )
        if isinstance(exc, httpx.RemoteProtocolError):
            return self._error(f"closed the connection without a valid response ({_describe(exc)})")
        return self._error(f"request failed: {_describe(exc)}")

    async def _status_error(self, response: httpx.Response) -> ProviderError:
        excerpt = await self._body_excerpt(response)
        status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        return self._error(
            f"{status} from /chat/completions: {excerpt}", status=response.status_code
        )

    async def _body_excerpt(self, response: httpx.Response) -> str:
        """A short, single-line, key-free excerpt of a response body (bounded read)."""
        raw = bytearray()
        try:
            async with asyncio.timeout(min(self._idle_timeout, 10.0)):
                async for part in response.aiter_bytes():
                    raw += part
                    if len(raw) >= _ERROR_BODY_LIMIT:
                        break
        except (TimeoutError, httpx.HTTPError):
            pass  # whatever arrived is still worth showing
        text = raw.decode("utf-8", "replace")
        try:
            text = _error_text(json.loads(text)) or text
        except ValueError:
            pass
        # Scrub before cutting: a cut could leave part of the key that no longer matches.
        text = scrub(text, [self._spec.api_key])
        return _excerpt(text) or "(empty body)"


# -- helpers ---------------------------------------------------------------------------------


async def _drain(lines: AsyncIterator[str]) -> None:
    try:
        async with asyncio.timeout(_DRAIN_AFTER_DONE):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass  # the response is closed by the caller either way


def _usage(chunk: dict) -> Usage | None:
    raw = chunk.get("usage")
    if not isinstance(raw, dict):
        groq = chunk.get("x_groq")
        raw = groq.get("usage") if isinstance(groq, dict) else None
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    # DeepSeek reports cache hits in its own field.
    cached = cached or _int(raw.get("prompt_cache_hit_tokens"))
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    total = _int(raw.get("total_tokens")) or prompt + completion
    return Usage(input=prompt, output=completion, cache_read=cached, total=total)


def _int(value: Any) -> int:
    # A malformed count must not fail a reply that arrived fine.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, int(value))


def _error_text(body: Any) -> str | None:
    """The human part of an OpenAI-style error body, if it has one."""
    if not isinstance(body, dict):
        return None
    err = body.get("error")
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    if isinstance(body.get("message"), str):
        return body["message"]
    return None


def _excerpt(text: str, limit: int = ERROR_EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _display_url(url: str) -> str:
    """The URL without any user:password part."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except Exception:  # an unparseable URL is shown as given (the key is scrubbed anyway)
        return url


def _causes(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _connect_failure(exc: httpx.ConnectError) -> str:
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return "refused the connection (is the server running, and is the port right?)"
        if isinstance(cause, socket.gaierror):
            return f"host name could not be resolved ({cause.strerror or cause})"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate rejected ({cause.verify_message or cause})"
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed ({cause.reason or cause})"
    return f"could not connect ({_describe(exc)})"


def _describe(exc: BaseException) -> str:
    # The innermost cause usually names the real problem (errno, TLS reason).
    innermost = list(_causes(exc))[-1]
    text = str(innermost) or str(exc)
    return f"{type(innermost).__name__}: {text}" if text else type(innermost).__name__

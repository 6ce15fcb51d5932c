"""What every HTTP model provider shares: one streamed POST read as server-sent events (sse.py,
bounded), model lists by GET, our own timeouts, how much one step may send (`StreamLimits`,
counted by each parser through a `StepMeter`), and errors a client may see.

- Timeouts are ours, not httpx's (requests run with httpx timeouts off, so a shared client's
  default cannot cut a slow model short): `first_token_timeout` bounds everything from connecting
  to the first SSE event that carries data; `idle_timeout` bounds each wait for the next one.
  SSE comments (OpenRouter's `: OPENROUTER PROCESSING` keep-alives) are not events, so a model
  that never starts still fails on time. The time the caller spends between pulls does not count.
- Errors a client sees carry the provider type, the display URL (no userinfo, no query), the
  HTTP status and a fixed phrase, never the remote body: the body goes to the log, bounded,
  single-line and scrubbed of the key. They are raised `from None`, so a
  traceback never prints the httpx exception (which holds the request and its headers).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from .base import ProviderError, ProviderSpec
from .network import NetworkRefused
from .redact import display_url, scrub
from .sse import EventTooLarge, bounded_events

log = logging.getLogger("seed_agents.providers")

# Logged excerpts of remote bodies: enough for any JSON error, never a whole page.
LOG_EXCERPT_CHARS = 500
_ERROR_BODY_LIMIT = 8192
# After the last event the body should end at once; reading to its end lets httpx reuse the
# connection, but a server that keeps it open must not hold the reply hostage.
_DRAIN_AFTER_END = 0.5
# A model list bigger than this many pages is cut there (Google pages 1000 models at most).
MAX_MODEL_PAGES = 20
# A model list body larger than this is refused (OpenRouter's, the largest, is about 1 MiB).
MAX_LIST_BODY = 8 << 20

STATUS_PHRASES = {
    400: "the provider refused the request",
    401: "the provider refused the API key",
    402: "the provider wants payment",
    403: "the provider denied access",
    404: "the provider does not know this model or endpoint",
    408: "the provider timed out",
    413: "the request is too large for the provider",
    422: "the provider refused the request",
    429: "rate limited by the provider",
    500: "the provider failed",
    502: "the provider is unavailable",
    503: "the provider is unavailable",
    504: "the provider timed out",
    529: "the provider is overloaded",
}


def status_phrase(status: int) -> str:
    if status in STATUS_PHRASES:
        return STATUS_PHRASES[status]
    return "the provider failed" if status >= 500 else "the provider answered with an error"


@dataclass(frozen=True)
class StreamLimits:
    """How much one model step may send (docs/operations.md "Tools and budgets"): a provider that
    goes past one fails the step with a ProviderError naming the setting, never holding more.
    Defaults are far past any real model's single reply (the largest emit some 128k tokens,
    about half a million characters)."""

    event_chars: int = 16 << 20      # one SSE line, or one event's data lines together
    step_chars: int = 2_000_000      # text, reasoning and tool-call arguments of one step
    calls: int = 256                 # tool calls of one step


class StepMeter:
    """What one model step has sent so far, against its StreamLimits; each parser counts what it
    keeps as it keeps it."""

    __slots__ = ("_provider", "_limits", "chars", "calls")

    def __init__(self, provider: "HttpProvider") -> None:
        self._provider = provider
        self._limits = provider.limits
        self.chars = 0
        self.calls = 0

    def text(self, n: int) -> None:
        self.chars += n
        if self.chars > self._limits.step_chars:
            raise self._provider._error(
                f"the model sent more than {self._limits.step_chars} characters in one step (text, reasoning "
                "and tool-call arguments together; this server's --max-step-output-chars); the step was stopped")

    def call(self) -> None:
        self.calls += 1
        if self.calls > self._limits.calls:
            raise self._provider._error(
                f"the model asked for more than {self._limits.calls} tool calls in one step (this server's "
                "--max-tool-calls-per-step); the step was stopped and none of them ran")


class StreamState:
    """What a provider's event handler learned so far that the transport needs to know."""

    __slots__ = ("finished",)

    def __init__(self) -> None:
        self.finished = False   # the provider said the reply is complete (a stop reason)


class HttpProvider:
    """Base of the HTTP providers: subclasses build requests and read events."""

    # The turn's reasoning level (protocol/agent/reasoning.py), set by the runtime after building the
    # provider; each family writes it into its request body (providers/reasoning.py).
    reasoning_level: str | None = None

    def __init__(
        self,
        spec: ProviderSpec,
        client: httpx.AsyncClient,
        *,
        first_token_timeout: float = 60.0,
        idle_timeout: float = 60.0,
        limits: StreamLimits = StreamLimits(),
    ) -> None:
        if not spec.base_url:
            raise ProviderError(f"provider {spec.type} has no base URL")
        self.name = spec.type
        self._spec = spec
        self._client = client
        self.base_url = spec.base_url.rstrip("/")
        try:
            self._base = httpx.URL(self.base_url)
        except httpx.InvalidURL:
            raise ProviderError(f"provider {spec.type} base URL is not a valid URL") from None
        if self._base.query or self._base.fragment:
            # Joined by string, `...?page=` would have turned our path into its query.
            raise ProviderError(f"provider {spec.type} base URL may not have a query or a fragment")
        self._first_token_timeout = first_token_timeout
        self._idle_timeout = idle_timeout
        self.limits = limits
        # Errors reach clients (a session's durable error events, which its readers see; a
        # 502): they name the provider's type, never its URL, which only the log shows.
        self._where = f"provider {spec.type}"
        self._log_where = f"provider {spec.type} at {display_url(spec.base_url)}"

    def endpoint(self, path: str, params: dict | None = None) -> str:
        """The base URL with `path` appended to its path, by the URL library (a path cannot
        become a query or another host); `params` is the whole query."""
        base = self._base
        return str(base.copy_with(path=base.path.rstrip("/") + "/" + path.lstrip("/"), params=params))

    # -- errors ----------------------------------------------------------------------------

    def _error(self, what: str, *, status: int | None = None) -> ProviderError:
        return ProviderError(f"{self._where}: {what}", secret=self._spec.api_key, status=status)

    def _log_remote(self, what: str, text: str) -> None:
        """Log what the provider said (the client only gets a fixed phrase)."""
        text = " ".join(scrub(text, [self._spec.api_key]).split())
        if len(text) > LOG_EXCERPT_CHARS:
            text = text[: LOG_EXCERPT_CHARS - 1] + "…"
        log.warning("%s: %s: %s", self._log_where, what, text or "(empty body)")

    def _first_token_error(self) -> ProviderError:
        return self._error(f"no first token within {_seconds(self._first_token_timeout)}")

    def _idle_error(self) -> ProviderError:
        return self._error(f"no data for {_seconds(self._idle_timeout)} in the middle of the stream")

    def _stream_error(self, kind: str | None = None) -> ProviderError:
        """A failure the provider reported inside an event stream (body logged, not shown)."""
        phrase = STREAM_ERROR_PHRASES.get(kind or "", "the provider reported an error mid-stream")
        status = STREAM_ERROR_STATUS.get(kind or "")
        return self._error(phrase if status is None else f"HTTP {status} ({phrase})", status=status)

    def _transport_error(self, exc: httpx.HTTPError, *, started: bool) -> ProviderError:
        if isinstance(exc, httpx.ConnectError):
            return self._error(_connect_failure(exc))
        if isinstance(exc, httpx.TimeoutException):
            return self._error("timed out")
        if started and isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return self._error("the connection broke mid-stream (the reply was cut off)")
        if isinstance(exc, httpx.RemoteProtocolError):
            return self._error("closed the connection without a valid response")
        return self._error(f"request failed ({type(exc).__name__})")

    async def _status_error(self, response: httpx.Response, what: str) -> ProviderError:
        body = await self._read_bounded(response)
        self._log_remote(f"HTTP {response.status_code} from {what}", body)
        status = response.status_code
        return self._error(f"HTTP {status} ({status_phrase(status)})", status=status)

    async def _read_bounded(self, response: httpx.Response) -> str:
        raw = bytearray()
        try:
            async with asyncio.timeout(min(self._idle_timeout, 10.0)):
                async for part in response.aiter_bytes():
                    raw += part
                    if len(raw) >= _ERROR_BODY_LIMIT:
                        break
        except (TimeoutError, httpx.HTTPError):
            pass  # whatever arrived is still worth logging
        return raw.decode("utf-8", "replace")

    # -- streaming -------------------------------------------------------------------------

    async def _open(self, url: str, body: dict, headers: dict[str, str], what: str,
                    deadline: float) -> httpx.Response:
        """POST `body` and return the streaming response once it is a 2xx event stream."""
        request = self._client.build_request(
            "POST", url, json=body, headers={"Accept": "text/event-stream", **headers},
            timeout=httpx.Timeout(None),
        )
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
        except TimeoutError:
            raise self._first_token_error() from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, started=False) from None
        try:
            if not response.is_success:
                raise await self._status_error(response, what)
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                self._log_remote(f"Content-Type {content_type or '(none)'} from {what}",
                                 await self._read_bounded(response))
                raise self._error("answered with something other than an event stream")
        except BaseException:
            await response.aclose()
            raise
        return response

    async def _sse(self, response: httpx.Response, deadline: float,
                   state: StreamState) -> AsyncIterator[ServerSentEvent]:
        """The response's events, each within its timeout; ends quietly when the connection
        breaks after the provider said it was finished."""
        loop = asyncio.get_running_loop()
        events = bounded_events(response, self.limits.event_chars)
        seen = False
        next_deadline: float | None = deadline
        async with aclosing(events):
            while True:
                if next_deadline is None:
                    next_deadline = loop.time() + self._idle_timeout
                try:
                    async with asyncio.timeout_at(next_deadline):
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise (self._idle_error() if seen else self._first_token_error()) from None
                except httpx.HTTPError as exc:
                    if state.finished:
                        return
                    raise self._transport_error(exc, started=True) from None
                except EventTooLarge:
                    raise self._error(f"sent a stream event longer than {self.limits.event_chars} characters "
                                      "(this server's --max-model-event-chars); the step was stopped") from None
                seen = True
                next_deadline = None   # the next wait starts when the caller asks for more
                yield event

    async def _drain(self, events: AsyncIterator[ServerSentEvent]) -> None:
        """Read what follows the last event, briefly, so the connection can be reused."""
        try:
            async with asyncio.timeout(_DRAIN_AFTER_END):
                async for _ in events:
                    pass
        except (TimeoutError, ProviderError):
            pass  # the response is closed by the caller either way

    def _json(self, data: str) -> dict:
        try:
            value = json.loads(data)
        except ValueError:
            self._log_remote("malformed JSON in the stream", data)
            raise self._error("sent malformed JSON in the stream") from None
        if not isinstance(value, dict):
            self._log_remote("stream event that is not a JSON object", data)
            raise self._error("sent a stream event that is not a JSON object")
        return value

    # -- model lists -----------------------------------------------------------------------

    async def _get_json(self, url: str, headers: dict[str, str], what: str,
                        params: dict | None = None) -> dict:
        """GET a JSON object, whole request within the first-token timeout, body bounded."""
        timeout = self._first_token_timeout
        request = self._client.build_request("GET", url, headers=headers, params=params,
                                             timeout=httpx.Timeout(None))
        response: httpx.Response | None = None
        try:
            async with asyncio.timeout(timeout):
                response = await self._client.send(request, stream=True)
                if not response.is_success:
                    raise await self._status_error(response, what)
                raw = bytearray()
                async for part in response.aiter_bytes():
                    raw += part
                    if len(raw) > MAX_LIST_BODY:
                        raise self._error(f"answered {what} with more than "
                                          f"{MAX_LIST_BODY >> 20} MiB")
        except TimeoutError:
            raise self._error(f"no answer within {_seconds(timeout)}") from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, started=False) from None
        finally:
            if response is not None:
                await response.aclose()
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            self._log_remote(f"not a JSON object from {what}",
                             bytes(raw[:_ERROR_BODY_LIMIT]).decode("utf-8", "replace"))
            raise self._error(f"answered {what} with something other than a JSON object")
        return value


# Error kinds providers name inside a stream (Anthropic's error.type, Google's error.status,
# OpenAI's error.type/code) mapped to our fixed phrases; anything else gets the generic one.
STREAM_ERROR_PHRASES = {
    "overloaded_error": "the provider is overloaded",
    "rate_limit_error": "rate limited by the provider",
    "RESOURCE_EXHAUSTED": "rate limited by the provider",
    "rate_limit_exceeded": "rate limited by the provider",
    "api_error": "the provider failed",
    "INTERNAL": "the provider failed",
    "server_error": "the provider failed",
    "UNAVAILABLE": "the provider is unavailable",
    "authentication_error": "the provider refused the API key",
    "UNAUTHENTICATED": "the provider refused the API key",
    "permission_error": "the provider denied access",
    "PERMISSION_DENIED": "the provider denied access",
    "invalid_request_error": "the provider refused the request",
    "INVALID_ARGUMENT": "the provider refused the request",
    "not_found_error": "the provider does not know this model or endpoint",
    "NOT_FOUND": "the provider does not know this model or endpoint",
}
STREAM_ERROR_STATUS = {
    "overloaded_error": 529, "rate_limit_error": 429, "RESOURCE_EXHAUSTED": 429,
    "rate_limit_exceeded": 429, "api_error": 500, "INTERNAL": 500, "server_error": 500,
    "UNAVAILABLE": 503, "authentication_error": 401, "UNAUTHENTICATED": 401,
    "permission_error": 403, "PERMISSION_DENIED": 403, "invalid_request_error": 400,
    "INVALID_ARGUMENT": 400, "not_found_error": 404, "NOT_FOUND": 404,
}


def non_negative_int(value: Any) -> int:
    """A token count from a provider; a malformed one must not fail a reply that arrived."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(0, int(value))


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _causes(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _connect_failure(exc: httpx.ConnectError) -> str:
    for cause in _causes(exc):
        if isinstance(cause, NetworkRefused):
            log.warning("provider connection refused by the network policy: %s", cause)
            return ("the address is outside the networks this server lets providers reach "
                    "(operator setting --provider-networks)")
        if isinstance(cause, ConnectionRefusedError):
            return "refused the connection (is the server running, and is the port right?)"
        if isinstance(cause, socket.gaierror):
            return "host name could not be resolved"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "TLS certificate rejected"
        if isinstance(cause, ssl.SSLError):
            return "TLS handshake failed"
    return "could not connect"

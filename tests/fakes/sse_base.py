"""What the fake Anthropic and Google servers share: a real HTTP/1.1 server on 127.0.0.1 that
records requests and plays scripted server-sent event streams (delays, a drop, a hang).

Subclasses route requests (`_route`) and turn a script into the provider's events (`_events`).
The HTTP server is tests/fakes/loopback.py's, the scripts and their pacing tests/fakes/scripted.py's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .loopback import RecordedRequest, pause, send, send_json
from .scripted import ScriptedFake, split_words, stream_events

__all__ = ["FakeSSEServer", "Script", "arguments_text", "split_words"]


@dataclass
class Script:
    """How a fake answers one streaming request."""

    chunks: Sequence[str] = ("Hello", " world")  # one text delta per chunk, in order
    echo: bool = False  # reply "echo: <last user text>", one chunk per word, instead of chunks
    status: int = 200  # >= 400: answer with this status and error_body (or the provider's JSON)
    error_body: str | None = None
    first_delay: float = 0.0  # after the headers, before the first event
    chunk_delay: float = 0.0  # between text chunks
    usage: dict | None = None  # provider-shaped usage; None: the fake's default
    error_after: int | None = None  # send the provider's mid-stream error event after N chunks
    error_message: str = "Overloaded"  # the human text of that error (must never reach a client)
    drop_after: int | None = None  # abort the socket after N chunks (no stop event)
    hang: bool = False  # read the request, then never answer
    stop: bool = True  # end with the provider's stop signal
    # Tool calls after the text, each {"id", "name", "arguments"} (arguments: a JSON text, which
    # may be malformed, or a value to encode); the stop reason becomes the provider's tool one.
    tool_calls: Sequence[dict] = ()
    cut_tool_call: bool = False  # the stream ends in the middle of the first call's arguments
    thinking: str | None = None  # Anthropic: a signed thinking block before the text


class FakeSSEServer(ScriptedFake):
    default_script = Script

    def __init__(self, script: Script | None = None, *, key: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(script or Script(), host=host, port=port)
        self.key = key  # when set, requests must carry it the provider's way, else 401/403

    # -- subclass hooks --------------------------------------------------------------------

    def _route(self, request: RecordedRequest) -> tuple[str, Any, Any]:
        """("stream", None, None) | ("json", status, value) | ("raw", status, body-bytes)."""
        raise NotImplementedError

    def _events(self, script: Script, request: RecordedRequest) -> list[tuple[bytes, bool]]:
        """The encoded SSE events of one reply, each flagged when it carries text."""
        raise NotImplementedError

    def _error_event(self, script: Script) -> bytes:
        raise NotImplementedError

    def _error_json(self, script: Script) -> str:
        raise NotImplementedError

    # -- connection ------------------------------------------------------------------------

    async def _respond(self, request: RecordedRequest, reader, writer) -> bool:
        self.requests.append(request)
        kind, status, value = self._route(request)
        if kind == "json":
            return await send_json(writer, status, value)
        if kind == "raw":
            return await send(writer, status, "application/json", value)
        return await self._play_next(request, reader, writer, self._play)

    async def _play(self, script: Script, request: RecordedRequest, reader, writer) -> str:
        if script.hang:
            await pause(reader, None)
            return "gone"
        if script.status >= 400:
            body = script.error_body if script.error_body is not None else self._error_json(script)
            await send(writer, script.status, "application/json", body.encode())
            return "done"
        return await stream_events(reader, writer, self._events(script, request),
                                   first_delay=script.first_delay, chunk_delay=script.chunk_delay,
                                   drop_after=script.drop_after, error_after=script.error_after,
                                   error_event=self._error_event(script) if script.error_after is not None else b"")


def arguments_text(call: dict) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)

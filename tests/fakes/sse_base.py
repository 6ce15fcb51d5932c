"""What the fake Anthropic and Google servers share: a real HTTP/1.1 server on 127.0.0.1 that
records requests and plays scripted server-sent event streams (delays, a drop, a hang).

Subclasses route requests (`_route`) and turn a script into the provider's events (`_events`).
The HTTP helpers are the OpenAI fake's (asyncio streams, keep-alive, Content-Length bodies).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .openai_server import LoopbackFake, RecordedRequest, _chunk, _head, _pause, _read_request, _send, _send_json


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


class FakeSSEServer(LoopbackFake):
    default_script = Script

    def __init__(self, script: Script | None = None, *, key: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(script or Script(), host=host, port=port)
        self.key = key  # when set, requests must carry it the provider's way, else 401/403

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

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

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        self.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                kind, status, value = self._route(request)
                if kind == "json":
                    await _send_json(writer, status, value)
                    continue
                if kind == "raw":
                    await _send(writer, status, "application/json", value)
                    continue
                script = self.scripts.popleft() if self.scripts else self.default
                if callable(script):   # a function of the request (a scripted model that looks)
                    script = script(request)
                index = len(self.requests) - 1
                try:
                    outcome = await self._play(script, request, reader, writer)
                except ConnectionError:
                    outcome = "gone"
                if outcome == "gone":
                    self.disconnects.append(index)
                if outcome != "done":
                    break
        except (ConnectionError, ValueError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _play(self, script: Script, request: RecordedRequest, reader, writer) -> str:
        if script.hang:
            await _pause(reader, None)
            return "gone"
        if script.status >= 400:
            body = script.error_body if script.error_body is not None else self._error_json(script)
            await _send(writer, script.status, "application/json", body.encode())
            return "done"
        events = self._events(script, request)
        head = _head(200, "text/event-stream", chunked=True)
        plain = (not script.first_delay and not script.chunk_delay and script.drop_after is None
                 and script.error_after is None)
        if plain:
            writer.write(head + b"".join(_chunk(e) for e, _ in events) + b"0\r\n\r\n")
            await writer.drain()
            return "done"
        writer.write(head)
        await writer.drain()
        if await _pause(reader, script.first_delay):
            return "gone"
        sent = 0
        for event, is_text in events:
            if is_text and script.drop_after is not None and sent >= script.drop_after:
                writer.transport.abort()
                return "dropped"
            if is_text and script.error_after is not None and sent >= script.error_after:
                writer.write(_chunk(self._error_event(script)) + b"0\r\n\r\n")
                await writer.drain()
                return "done"
            if is_text and sent and await _pause(reader, script.chunk_delay):
                return "gone"
            writer.write(_chunk(event))
            await writer.drain()
            sent += is_text
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "done"


def split_words(text: str) -> list[str]:
    """Words with the following space kept, so the pieces join back to `text`."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def arguments_text(call: dict) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)

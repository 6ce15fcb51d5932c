"""A fake OpenAI-compatible chat-completions server on a real 127.0.0.1 socket.

In a test:

    async with FakeOpenAI(Script(chunks=["Hel", "lo"])) as fake:
        provider = OpenAICompatProvider(ProviderSpec("custom", fake.base_url), client)
        fake.enqueue(Script(status=500))     # the next request only; then the default again
        ...
        fake.requests[0].body["messages"]    # everything the client sent is recorded
        await fake.wait_for_disconnect()      # the client closed a response early

From another process (when the server under test runs in a subprocess):

    python -m tests.fakes.openai_server --port 0 --mode plain|slow|error|drop|hang

prints `FAKE_OPENAI_LISTENING http://127.0.0.1:PORT/v1` once it listens. Over HTTP,
`GET /_fake/requests` returns what was recorded and `POST /_fake/script` (a JSON object of
Script fields) queues a script for the next chat request.

Built on asyncio streams only (no new dependency); HTTP/1.1 with keep-alive, because httpx
reuses connections; request bodies must carry Content-Length (httpx always sends one for JSON).
With no delays a reply is one write, so the fake costs little in benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from typing import Any

DEFAULT_USAGE = {
    "prompt_tokens": 7,
    "completion_tokens": 2,
    "total_tokens": 9,
    "prompt_tokens_details": {"cached_tokens": 3},
}

# How often a paused response looks for the client having gone away.
_POLL_SECONDS = 0.005


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or None when the body was empty or not JSON
    raw_body: bytes = b""


# `reasoning_effort` values OpenAI takes; a request with a reasoning effort gets THINKING_TEXT
# streamed as reasoning before its answer.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
THINKING_TEXT = "Thinking it over, step by step."


@dataclass
class Script:
    """How the fake answers one chat request."""

    chunks: Sequence[str] = ("Hello", " world")  # one `delta.content` per chunk, in order
    echo: bool = False  # reply "echo: <last user message>", one chunk per word, instead of chunks
    status: int = 200  # >= 400: answer with this status and error_body, no stream
    error_body: str | Callable[[RecordedRequest], str] | None = None  # default: OpenAI-style JSON
    first_delay: float = 0.0  # after the headers, before the first event
    chunk_delay: float = 0.0  # between content chunks
    usage: dict | None = field(default_factory=lambda: json.loads(json.dumps(DEFAULT_USAGE)))
    finish_reason: str | None = "stop"
    done: bool = True  # send `data: [DONE]` at the end
    drop_after: int | None = None  # close the socket after this many content chunks, no [DONE]
    hang: bool = False  # read the request, then never answer (until the client gives up)
    raw_events: Sequence[str] | None = None  # exact `data:` payloads instead of the generated ones
    json_body: str | None = None  # answer 200 with this JSON body, not a stream (stream ignored)
    # Tool calls after the text, each {"id", "name", "arguments"} (arguments: a JSON text, which
    # may be malformed, or a value to encode), streamed as delta.tool_calls pieces by index (several:
    # parallel calls); finish_reason becomes "tool_calls".
    tool_calls: Sequence[dict] = ()
    cut_tool_call: bool = False  # the stream ends in the middle of the first call's arguments


class LoopbackFake:
    """A real HTTP server on loopback that records requests and answers them from scripts
    (`default`, or the next one `enqueue`d); the fake providers share this life cycle and
    define `_handle` (one connection) and `base_url`."""

    def __init__(self, default, *, host: str = "127.0.0.1", port: int = 0) -> None:  # noqa: ANN001
        self.default = default
        self.scripts: deque = deque()
        self.requests: list[RecordedRequest] = []
        # Indexes into `requests` of the streamed responses the client closed before they ended.
        self.disconnects: list[int] = []
        self.connections = 0  # accepted so far; shows whether clients reuse connections
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def start(self):  # noqa: ANN201
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        # On 3.11 closing the server leaves accepted connections open; end them ourselves.
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self):  # noqa: ANN204
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def enqueue(self, *scripts) -> None:  # noqa: ANN002
        """Answer the next requests with these scripts, in order, then the default."""
        self.scripts.extend(scripts)

    async def wait_for_disconnect(self, count: int = 1, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.disconnects) < count:
                await asyncio.sleep(_POLL_SECONDS)

    async def wait_for_requests(self, count: int = 1, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.requests) < count:
                await asyncio.sleep(_POLL_SECONDS)


class FakeOpenAI(LoopbackFake):
    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0):
        super().__init__(script or Script(), host=host, port=port)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

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
                if not await self._route(request, reader, writer):
                    break
        except (ConnectionError, ValueError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass  # the client went away or sent something we do not speak; drop it
        except asyncio.CancelledError:
            pass  # close() ends open connections
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _route(self, request: RecordedRequest, reader, writer) -> bool:
        """Answer one request; False when the connection must end."""
        path = request.path.split("?", 1)[0]
        if path == "/_fake/requests" and request.method == "GET":
            return await _send_json(writer, 200, self._report())
        if path == "/_fake/script" and request.method == "POST":
            try:
                self.enqueue(Script(**request.body))
            except TypeError as exc:
                return await _send_json(writer, 400, {"error": {"message": str(exc)}})
            return await _send_json(writer, 200, {"queued": len(self.scripts)})

        self.requests.append(request)
        if path.endswith("/chat/completions") and request.method == "POST":
            script = self.scripts.popleft() if self.scripts else self.default
            if callable(script):   # a function of the request (a scripted model that looks)
                script = script(request)
            index = len(self.requests) - 1
            try:
                outcome = await self._chat(script, request, reader, writer)
            except ConnectionError:
                outcome = "gone"
            if outcome == "gone":
                self.disconnects.append(index)
            if outcome != "done":
                return False
            return request.headers.get("connection", "").lower() != "close"
        if path.endswith("/models") and request.method == "GET":
            models = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
            return await _send_json(writer, 200, models)
        return await _send_json(writer, 404, {"error": {"message": f"no route {path}"}})

    def _report(self) -> dict:
        return {
            "requests": [
                {k: v for k, v in asdict(r).items() if k != "raw_body"} for r in self.requests
            ],
            "disconnects": list(self.disconnects),
            "connections": self.connections,
        }

    # -- chat ------------------------------------------------------------------------------

    async def _chat(self, script: Script, request: RecordedRequest, reader, writer) -> str:
        """Play `script`: "done", "dropped" (by the script) or "gone" (the client left early)."""
        if script.hang:
            await _pause(reader, None)
            return "gone"
        if script.status >= 400:
            body = script.error_body
            if callable(body):
                body = body(request)
            if body is None:
                body = json.dumps(
                    {"error": {"message": "fake failure", "type": "server_error", "code": None}}
                )
            await _send(writer, script.status, "application/json", body.encode())
            return "done"
        if script.json_body is not None:
            await _send(writer, 200, "application/json", script.json_body.encode())
            return "done"
        effort = (request.body or {}).get("reasoning_effort") if isinstance(request.body, dict) else None
        if effort is not None and effort not in REASONING_EFFORTS:   # as OpenAI refuses it
            await _send_json(writer, 400, {"error": {"message": f"Unsupported value: {effort!r}",
                                                     "type": "invalid_request_error",
                                                     "param": "reasoning_effort"}})
            return "done"

        events = _events(script, request)
        head = _head(200, "text/event-stream", chunked=True)
        if not script.first_delay and not script.chunk_delay and script.drop_after is None:
            # The fast path: the whole reply in one write.
            writer.write(head + b"".join(_chunk(e) for e, _ in events) + b"0\r\n\r\n")
            await writer.drain()
            return "done"

        writer.write(head)
        await writer.drain()
        if await _pause(reader, script.first_delay):
            return "gone"
        sent = 0  # content events so far
        for event, is_content in events:
            if is_content and script.drop_after is not None and sent >= script.drop_after:
                writer.transport.abort()  # no [DONE], no chunked terminator: a broken stream
                return "dropped"
            if is_content and sent and await _pause(reader, script.chunk_delay):
                return "gone"
            writer.write(_chunk(event))
            await writer.drain()
            sent += is_content
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return "done"


# -- HTTP helpers ----------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        first = await reader.readexactly(1)
        if not first.isalpha():
            return None  # not HTTP (e.g. a TLS handshake): hang up, as a real server would
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed an idle keep-alive connection
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    raw = await reader.readexactly(length) if length else b""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return RecordedRequest(method, target, headers, body, raw)


def _head(status: int, content_type: str, *, chunked: bool = False, length: int = 0) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Cache-Control: no-cache\r\n{framing}\r\n\r\n"
    ).encode("latin-1")


async def _send(writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes) -> None:
    writer.write(_head(status, content_type, length=len(body)) + body)
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, status: int, value: Any) -> bool:
    await _send(writer, status, "application/json", json.dumps(value).encode())
    return True


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _pause(reader: asyncio.StreamReader, seconds: float | None) -> bool:
    """Wait `seconds` (None: forever); True as soon as the client closes the connection."""
    loop = asyncio.get_running_loop()
    end = None if seconds is None else loop.time() + seconds
    # EOF is fed to the reader by the protocol whether or not anyone reads, so polling
    # at_eof() notices a closed connection without consuming request bytes.
    while not reader.at_eof():
        if end is not None and loop.time() >= end:
            return False
        await asyncio.sleep(_POLL_SECONDS if end is None else min(_POLL_SECONDS, end - loop.time()))
    return True


# -- SSE payloads ----------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    """Words with the following space kept, so the pieces join back to `text`."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def _reply_pieces(script: Script, body: dict) -> list[str]:
    if not script.echo:
        return list(script.chunks)
    messages = body.get("messages") or []
    last_user = next(
        (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
    )
    return _split("echo: " + str(last_user))


def _events(script: Script, request: RecordedRequest) -> list[tuple[bytes, bool]]:
    """Every SSE event of the reply, encoded, in order, each flagged when it carries content
    (content events are the ones chunk_delay and drop_after count)."""
    body = request.body if isinstance(request.body, dict) else {}
    events: list[tuple[str, bool]]
    if script.raw_events is not None:
        events = [(p, True) for p in script.raw_events]
    else:
        model = body.get("model", "fake-model")

        def chunk(choices: list, **extra: Any) -> str:
            return json.dumps(
                {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": model, "choices": choices, **extra}
            )

        def choice(delta: dict, finish_reason: str | None = None) -> list:
            return [{"index": 0, "delta": delta, "finish_reason": finish_reason}]

        events = [(chunk(choice({"role": "assistant", "content": ""})), False)]
        if body.get("reasoning_effort") not in (None, "none"):
            # Reasoning streams first, in its own field (DeepSeek's and OpenRouter's
            # reasoning_content): never the answer.
            events.append((chunk(choice({"reasoning_content": THINKING_TEXT})), False))
        events += [(chunk(choice({"content": p})), True) for p in _reply_pieces(script, body)]
        for i, call in enumerate(script.tool_calls):
            args = call.get("arguments", {})
            args = args if isinstance(args, str) else json.dumps(args)
            half = len(args) // 2
            events.append((chunk(choice({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                         "function": {"name": call["name"], "arguments": ""}}]})), False))
            events.append((chunk(choice({"tool_calls": [{"index": i, "function": {"arguments": args[:half]}}]})), False))
            if script.cut_tool_call:
                return [(f"data: {p}\n\n".encode(), c) for p, c in events]
            events.append((chunk(choice({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})), False))
        if script.finish_reason:
            reason = "tool_calls" if script.tool_calls and script.finish_reason == "stop" else script.finish_reason
            events.append((chunk(choice({}, reason)), False))
        # Like OpenAI: the usage chunk only when the client asked for it.
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if script.usage is not None and wants_usage:
            events.append((chunk([], usage=script.usage), False))
    if script.done:
        events.append(("[DONE]", False))
    return [(f"data: {p}\n\n".encode(), is_content) for p, is_content in events]


# -- command line ----------------------------------------------------------------------------

MODES = {
    "plain": lambda a: Script(chunks=_split(a.text)),
    "echo": lambda a: Script(echo=True),
    "slow": lambda a: Script(chunks=_split(a.text), first_delay=a.first_delay or 0.5,
                             chunk_delay=a.chunk_delay or 0.2),
    "error": lambda a: Script(status=a.status or 500),
    "drop": lambda a: Script(chunks=_split(a.text), drop_after=1),
    "hang": lambda a: Script(hang=True),
}


async def _serve(args: argparse.Namespace) -> None:
    script = MODES[args.mode](args)
    if args.mode in ("plain", "drop"):
        script.first_delay, script.chunk_delay = args.first_delay, args.chunk_delay
    async with FakeOpenAI(script, host=args.host, port=args.port) as fake:
        print(f"FAKE_OPENAI_LISTENING {fake.base_url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible streaming server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--mode", choices=sorted(MODES), default="plain")
    parser.add_argument("--text", default="Hello from the fake")
    parser.add_argument("--first-delay", type=float, default=0.0)
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    parser.add_argument("--status", type=int, default=0)
    asyncio.run(_serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()

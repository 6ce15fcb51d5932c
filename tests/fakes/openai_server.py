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

Built on tests/fakes/loopback.py (asyncio streams only, no new dependency); HTTP/1.1 with keep-alive, because httpx
reuses connections; request bodies must carry Content-Length (httpx always sends one for JSON).
With no delays a reply is one write, so the fake costs little in benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .loopback import RecordedRequest, chunk_frame, pause, response_head, send, send_json, serve_until_signal
from .scripted import ScriptedFake, split_words, stream_events

DEFAULT_USAGE = {
    "prompt_tokens": 7,
    "completion_tokens": 2,
    "total_tokens": 9,
    "prompt_tokens_details": {"cached_tokens": 3},
}

HOLD_S = 60.0   # the longest a held answer waits (Script.hold)
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
    # A hostile reply, written as it goes (never held whole here): {"kind": "text", "bytes": N}
    # (N bytes of reply text in 64 KiB deltas, then a normal end), {"kind": "line", "bytes": N}
    # (one `data:` line of N bytes that never ends), {"kind": "calls", "count": N} (N tool calls,
    # one event each, then a normal end).
    flood: dict | None = None
    # Hold the answer until the test sets this event (at most HOLD_S): a turn that stays running
    # while the test queues more behind it.
    hold: asyncio.Event | None = None


class FakeOpenAI(ScriptedFake):
    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0):
        super().__init__(script or Script(), host=host, port=port)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def _respond(self, request: RecordedRequest, reader, writer) -> bool:
        """Answer one request; False when the connection must end."""
        path = request.path.split("?", 1)[0]
        if path == "/_fake/requests" and request.method == "GET":
            return await send_json(writer, 200, self._report())
        if path == "/_fake/script" and request.method == "POST":
            try:
                self.enqueue(Script(**request.body))
            except TypeError as exc:
                return await send_json(writer, 400, {"error": {"message": str(exc)}})
            return await send_json(writer, 200, {"queued": len(self.scripts)})

        self.requests.append(request)
        if path.endswith("/chat/completions") and request.method == "POST":
            if not await self._play_next(request, reader, writer, self._chat):
                return False
            return request.headers.get("connection", "").lower() != "close"
        if path.endswith("/models") and request.method == "GET":
            models = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
            return await send_json(writer, 200, models)
        return await send_json(writer, 404, {"error": {"message": f"no route {path}"}})

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
            await pause(reader, None)
            return "gone"
        if script.hold is not None:
            async with asyncio.timeout(HOLD_S):
                await script.hold.wait()
        if script.status >= 400:
            body = script.error_body
            if callable(body):
                body = body(request)
            if body is None:
                body = json.dumps(
                    {"error": {"message": "fake failure", "type": "server_error", "code": None}}
                )
            await send(writer, script.status, "application/json", body.encode())
            return "done"
        if script.json_body is not None:
            await send(writer, 200, "application/json", script.json_body.encode())
            return "done"
        effort = (request.body or {}).get("reasoning_effort") if isinstance(request.body, dict) else None
        if effort is not None and effort not in REASONING_EFFORTS:   # as OpenAI refuses it
            await send_json(writer, 400, {"error": {"message": f"Unsupported value: {effort!r}",
                                                     "type": "invalid_request_error",
                                                     "param": "reasoning_effort"}})
            return "done"

        if script.flood is not None:
            return await _flood(script.flood, writer)
        events = _events(script, request)
        return await stream_events(reader, writer, events, first_delay=script.first_delay,
                                   chunk_delay=script.chunk_delay, drop_after=script.drop_after)


# -- SSE payloads ----------------------------------------------------------------------------


def _reply_pieces(script: Script, body: dict) -> list[str]:
    if not script.echo:
        return list(script.chunks)
    messages = body.get("messages") or []
    last_user = next(
        (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
    )
    return split_words("echo: " + str(last_user))


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


FLOOD_PIECE = 64 * 1024


def _chunk(choices: list) -> bytes:
    return b"data: " + json.dumps({"id": "chatcmpl-flood", "object": "chat.completion.chunk", "created": 0,
                                   "model": "fake-model", "choices": choices}).encode() + b"\n\n"


async def _flood(flood: dict, writer) -> str:  # noqa: ANN001
    """Play a hostile reply (Script.flood); "gone" once the client closes the connection."""
    kind = flood["kind"]
    writer.write(response_head(200, "text/event-stream", chunked=True))
    try:
        if kind == "line":
            writer.write(chunk_frame(b'data: {"choices": [{"index": 0, "delta": {"content": "'))
            for _ in range(flood["bytes"] // FLOOD_PIECE):
                writer.write(chunk_frame(b"x" * FLOOD_PIECE))
                await writer.drain()
            writer.transport.abort()   # never ended: the connection cannot be reused
            return "dropped"
        if kind == "text":
            event = _chunk([{"index": 0, "delta": {"content": "x" * FLOOD_PIECE}, "finish_reason": None}])
            for _ in range(flood["bytes"] // FLOOD_PIECE):
                writer.write(chunk_frame(event))
                await writer.drain()
            finish = "stop"
        else:   # calls
            batch = []
            for i in range(flood["count"]):
                batch.append(_chunk([{"index": 0, "delta": {"tool_calls": [{
                    "index": i, "id": f"call_{i}", "type": "function",
                    "function": {"name": "read", "arguments": '{"address": "~/memory/x"}'}}]}, "finish_reason": None}]))
                if len(batch) == 500:
                    writer.write(chunk_frame(b"".join(batch)))
                    batch = []
                    await writer.drain()
            writer.write(chunk_frame(b"".join(batch) or b"\n"))
            finish = "tool_calls"
        writer.write(chunk_frame(_chunk([{"index": 0, "delta": {}, "finish_reason": finish}]) + b"data: [DONE]\n\n")
                     + b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        return "gone"
    return "done"


# -- command line ----------------------------------------------------------------------------

MODES = {
    "plain": lambda a: Script(chunks=split_words(a.text)),
    "echo": lambda a: Script(echo=True),
    "slow": lambda a: Script(chunks=split_words(a.text), first_delay=a.first_delay or 0.5,
                             chunk_delay=a.chunk_delay or 0.2),
    "error": lambda a: Script(status=a.status or 500),
    "drop": lambda a: Script(chunks=split_words(a.text), drop_after=1),
    "hang": lambda a: Script(hang=True),
}


async def _serve(args: argparse.Namespace) -> None:
    script = MODES[args.mode](args)
    if args.mode in ("plain", "drop"):
        script.first_delay, script.chunk_delay = args.first_delay, args.chunk_delay
    async with FakeOpenAI(script, host=args.host, port=args.port) as fake:
        await serve_until_signal(f"FAKE_OPENAI_LISTENING {fake.base_url}")


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

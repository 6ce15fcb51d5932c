"""What the fake model providers (tests/fakes/openai_server.py, and the Anthropic and Google
fakes through sse_base.py) share: requests answered from scripts, in order, then a default,
and a streamed reply written as the script paces it (delays, a drop, a mid-stream error).
"""

from __future__ import annotations

import asyncio
from collections import deque

from .loopback import POLL_SECONDS, LoopbackFake, RecordedRequest, chunk_frame, pause, response_head
from tests.waiting import until


class ScriptedFake(LoopbackFake):
    """A loopback fake that records requests and answers them from scripts (`default`, or the
    next one `enqueue`d); the fake providers share it and define `_respond` and `base_url`."""

    def __init__(self, default, *, host: str = "127.0.0.1", port: int = 0) -> None:  # noqa: ANN001
        super().__init__(host=host, port=port)
        self.default = default
        self.scripts: deque = deque()
        self.requests: list[RecordedRequest] = []
        # Indexes into `requests` of the streamed responses the client closed before they ended.
        self.disconnects: list[int] = []

    async def _play_next(self, request: RecordedRequest, reader, writer, play) -> bool:  # noqa: ANN001
        """Play the next script (a function of the request: called with it) to the request last
        recorded, with `play` (which returns "done", "gone" or "dropped"); True when done."""
        script = self.scripts.popleft() if self.scripts else self.default
        if callable(script):   # a function of the request (a scripted model that looks)
            script = script(request)
        index = len(self.requests) - 1
        try:
            outcome = await play(script, request, reader, writer)
        except ConnectionError:
            outcome = "gone"
        if outcome == "gone":
            self.disconnects.append(index)
        return outcome == "done"

    def enqueue(self, *scripts) -> None:  # noqa: ANN002
        """Answer the next requests with these scripts, in order, then the default."""
        self.scripts.extend(scripts)

    async def wait_for_disconnect(self, count: int = 1, timeout: float = 5.0) -> None:
        await until(lambda: len(self.disconnects) >= count, timeout, step=POLL_SECONDS,
                    what=f"{count} disconnects")

    async def wait_for_requests(self, count: int = 1, timeout: float = 5.0) -> None:
        await until(lambda: len(self.requests) >= count, timeout, step=POLL_SECONDS,
                    what=f"{count} requests")


async def stream_events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        events: list[tuple[bytes, bool]], *, first_delay: float = 0.0,
                        chunk_delay: float = 0.0, drop_after: int | None = None,
                        error_after: int | None = None, error_event: bytes = b"") -> str:
    """Write `events` (each flagged when it carries text) as one chunked event stream: after
    `first_delay`, `chunk_delay` between text events, the socket aborted after `drop_after`
    text events or `error_event` sent after `error_after`. "done", "gone" (the client left
    during a pause) or "dropped"."""
    head = response_head(200, "text/event-stream", chunked=True)
    if not first_delay and not chunk_delay and drop_after is None and error_after is None:
        # The fast path: the whole reply in one write.
        writer.write(head + b"".join(chunk_frame(e) for e, _ in events) + b"0\r\n\r\n")
        await writer.drain()
        return "done"
    writer.write(head)
    await writer.drain()
    if await pause(reader, first_delay):
        return "gone"
    sent = 0  # text events so far
    for event, is_text in events:
        if is_text and drop_after is not None and sent >= drop_after:
            writer.transport.abort()  # no stop event, no chunked terminator: a broken stream
            return "dropped"
        if is_text and error_after is not None and sent >= error_after:
            writer.write(chunk_frame(error_event) + b"0\r\n\r\n")
            await writer.drain()
            return "done"
        if is_text and sent and await pause(reader, chunk_delay):
            return "gone"
        writer.write(chunk_frame(event))
        await writer.drain()
        sent += is_text
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return "done"


def split_words(text: str) -> list[str]:
    """Words with the following space kept, so the pieces join back to `text`."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]

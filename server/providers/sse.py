"""A provider's event stream read as server-sent events, bounded in size.

httpx-sse parses the fields (`SSEDecoder`), but its line splitter keeps whatever arrives until a
newline comes, and an event's `data:` lines until a blank line: a provider that sends 100 MB
without either would have all of it held. Here the text is counted as it arrives (after any
Content-Encoding, so a compressed bomb counts what it unpacks to): a line, or one event's data
lines together, longer than `max_chars` characters raises `EventTooLarge` before more is read. Lines end at
CR, LF or CRLF, as the SSE specification says.
"""
from __future__ import annotations

import codecs
from collections.abc import AsyncGenerator

import httpx
from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder   # the field parser alone (no public name for it)


class EventTooLarge(Exception):
    """A line, or one event's data, passed the bound."""


async def bounded_events(response: httpx.Response, max_chars: int) -> AsyncGenerator[ServerSentEvent, None]:
    decoder = SSEDecoder()
    text = codecs.getincrementaldecoder("utf-8")("replace")
    pending: list[str] = []     # the line under way, in pieces
    pending_size = 0
    event_size = 0             # data lines of the event under way
    after_cr = False
    async for chunk in response.aiter_bytes():
        if not chunk:
            continue
        piece = text.decode(chunk)
        start = 0
        if after_cr and piece.startswith("\n"):
            start = 1   # the LF of a CRLF split across chunks
        after_cr = False
        size = len(piece)
        while start < size:
            cr, lf = piece.find("\r", start), piece.find("\n", start)
            end = lf if cr < 0 else cr if lf < 0 else min(cr, lf)
            if end < 0:
                pending.append(piece[start:])
                pending_size += size - start
                if pending_size > max_chars:
                    raise EventTooLarge()
                break
            pending.append(piece[start:end])
            line = "".join(pending)
            pending, pending_size = [], 0
            if len(line) > max_chars:
                raise EventTooLarge()
            if piece.startswith("\r\n", end):
                start = end + 2
            else:
                start = end + 1
                after_cr = piece[end] == "\r" and start == size
            if line.startswith("data"):
                event_size += len(line)
                if event_size > max_chars:
                    raise EventTooLarge()
            event = decoder.decode(line)
            if not line:
                event_size = 0
            if event is not None:
                yield event
    line = "".join(pending) + text.decode(b"", final=True)
    if line:
        event = decoder.decode(line)
        if event is not None:   # (an event needs its blank line; httpx-sse behaves the same)
            yield event

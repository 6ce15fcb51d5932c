"""The HTTP/1.1 reader: bytes in, typed events out, no I/O (as h11 reads; the parsing itself is
llhttp's, through httptools, chosen by measurement: bench/http.py).

`feed(data)` takes what the socket gave and returns an iterator of events, read lazily: the
caller handles each as it comes and may stop at any one (`close()`): nothing after it is parsed.
A connection reads with one `HttpReader` from its first byte to its last:

- `Started`: a request's first byte (its head's clock starts);
- `Head`: the request line and headers, complete;
- `Body`: a piece of the body, as it arrives (chunked bodies de-chunked);
- `End`: the request is complete (`keep_alive`, `upgrade`);
- `Refused`: the bytes break a bound or are not HTTP; the reader is closed after it, and the
  caller answers with `status` and `message` and closes the connection.

Bounds, all checked between pieces of at most `HEAD_PIECE` bytes (`BODY_PIECE` within a body),
so they hold within one read however large: a head over `MAX_HEAD_BYTES` is 431 as soon as it
crosses it; so are chunk framing and trailers past the same bound (plus `CHUNK_FRAMING` bytes
per chunk); a request that asks to switch protocols and has a body is 400 (the parser would read
the body as the next request); and at most `pipeline_max` requests are read and not yet
answered: past that `feed` stops (`paused`), the rest kept unparsed until `answered()` is
called and `feed(b"")` resumes.

After an `End` with `upgrade`, the caller either takes the connection (`detach()`: the bytes
after the request, which belong to the new protocol) or reads on as plain HTTP.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import httptools

MAX_HEAD_BYTES = 32 * 1024   # request line + headers; more is 431
CHUNK_FRAMING = 16           # bytes of chunk framing allowed per chunk beyond MAX_HEAD_BYTES
PIPELINE_MAX = 16            # requests read and not yet answered; the rest of a read waits unparsed
HEAD_PIECE = 4096            # bytes given to the parser at once outside a body
BODY_PIECE = 64 * 1024       # the same within a body, whose bytes cost an event per piece


@dataclass(slots=True)
class Started:
    """A request's first byte has arrived."""


@dataclass(slots=True)
class Head:
    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    http_version: str
    upgrade: bool   # it asks to switch protocols (Connection: upgrade + Upgrade)

    def raw(self) -> bytes:
        """The head as bytes again (for a handover to another protocol's parser)."""
        lines = [f"{self.method} {self.target} HTTP/{self.http_version}\r\n".encode("latin-1")]
        lines += [name + b": " + value + b"\r\n" for name, value in self.headers]
        lines.append(b"\r\n")
        return b"".join(lines)


@dataclass(slots=True)
class Body:
    data: bytes


@dataclass(slots=True)
class End:
    keep_alive: bool
    upgrade: bool


@dataclass(slots=True)
class Refused:
    status: int
    message: str


Event = Started | Head | Body | End | Refused


# Made once: a request costs no allocation for its start and end (frozen dataclasses would cost
# a microsecond each to build; these are read only by convention).
_STARTED = Started()
_ENDS = {(k, u): End(k, u) for k in (False, True) for u in (False, True)}


class _Bound(Exception):
    """Raised from a parser callback: a bound is crossed (the refusal is already queued)."""


class HttpReader:
    """One connection's requests, read from its bytes."""

    def __init__(self, *, pipeline_max: int = PIPELINE_MAX) -> None:
        self.pipeline_max = pipeline_max
        self._parser = httptools.HttpRequestParser(self)
        self._buffer = b""              # read and not yet parsed
        self._events: deque[Event] = deque()
        self.closed = False             # a refusal, or the caller's close(): nothing more is read
        self.detached = False           # the connection went to another protocol
        self._stopped = False           # a bound crossed: its refusal is queued, nothing more parsed
        self.phase = "idle"             # of the request being read: idle, head, body
        self.unanswered = 0             # requests ended and not yet answered
        self._url = bytearray()
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0            # counted by the callbacks (url and headers)
        self._head_fed = 0              # bytes fed within an unfinished head
        self._framing_fed = 0           # chunk framing and trailer bytes of the current body
        self._chunks = 0
        self._piece_body = 0
        self._completed = False

    # -- the caller's side -----------------------------------------------------------------------
    @property
    def in_request(self) -> bool:
        """Between a request's first byte and its last."""
        return self.phase != "idle"

    @property
    def buffered(self) -> bool:
        """Bytes wait unparsed (behind the pipeline bound)."""
        return bool(self._buffer)

    @property
    def paused(self) -> bool:
        return self.unanswered >= self.pipeline_max and not self.closed

    def feed(self, data: bytes) -> Iterator[Event]:
        if data and not (self.closed or self.detached):
            self._buffer = self._buffer + data if self._buffer else data
        return self._read()

    def answered(self) -> None:
        """One request's answer has been started: it no longer counts against the pipeline bound."""
        if self.unanswered:
            self.unanswered -= 1

    def close(self) -> None:
        """Read nothing more (an answer that ends the connection is decided)."""
        self.closed = True
        self._buffer = b""
        self._events.clear()

    def detach(self) -> bytes:
        """After an upgrade: the bytes that followed the request; the reader reads no more."""
        self.detached = True
        rest, self._buffer = self._buffer, b""
        self._events.clear()
        return rest

    # -- reading ---------------------------------------------------------------------------------
    def _read(self) -> Iterator[Event]:
        while True:
            while self._events:
                if self.closed or self.detached:
                    return
                event = self._events.popleft()
                if type(event) is Refused:
                    self.close()   # what was read before it came out first; nothing after it
                yield event
            if self.closed or self.detached or self._stopped or not self._buffer or self.paused:
                return
            self._feed_piece()

    def _feed_piece(self) -> None:
        data = self._buffer
        piece = memoryview(data)[:BODY_PIECE if self.phase == "body" else HEAD_PIECE]
        before = self.phase
        self._completed = False
        self._piece_body = 0
        used = len(piece)
        try:
            self._parser.feed_data(piece)
        except httptools.HttpParserUpgrade as exc:
            # The parser stops after a request that asks to switch protocols: what follows is the
            # new protocol's, or (the caller reading on) the next request.
            self._buffer = data[exc.args[0]:]
            return
        except httptools.HttpParserCallbackError:
            self._stop()   # a bound, from a callback: its refusal is queued
            return
        except httptools.HttpParserError as exc:
            self._refuse(400, f"malformed HTTP request: {exc}")
            self._stop()
            return
        self._buffer = data[used:]
        if not self._completed and self._count_piece(before, used):
            self._stop()

    def _count_piece(self, before: str, size: int) -> bool:
        """Count a piece that ended no request: all head, or all body and its framing. True when
        a bound is crossed (the refusal is queued)."""
        if self.phase == "head":
            self._head_fed += size
            if self._head_fed > MAX_HEAD_BYTES:
                self._refuse(431, f"request head over {MAX_HEAD_BYTES} bytes")
                return True
        elif self.phase == "body" and before == "body":
            self._framing_fed += size - self._piece_body
            if self._framing_fed > MAX_HEAD_BYTES + CHUNK_FRAMING * self._chunks:
                self._refuse(431, f"chunk framing and trailers over {MAX_HEAD_BYTES} bytes")
                return True
        return False

    def _refuse(self, status: int, message: str) -> None:
        self._events.append(Refused(status, message))

    def _stop(self) -> None:
        """A bound is crossed: nothing more is parsed (the queued events, the refusal last, still
        come out)."""
        self._buffer = b""
        self._stopped = True

    # -- httptools' callbacks ----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.phase = "head"
        self._url = bytearray()
        self._headers = []
        self._head_bytes = self._head_fed = self._framing_fed = self._chunks = 0
        self._events.append(_STARTED)

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_bytes += len(url)
        if self._head_bytes > MAX_HEAD_BYTES:
            self._head_too_large()

    def on_header(self, name: bytes, value: bytes) -> None:
        # Called once per header of every request: the count is inlined.
        self._headers.append((name, value))
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > MAX_HEAD_BYTES:
            self._head_too_large()

    def _head_too_large(self) -> None:
        self._refuse(431, f"request head over {MAX_HEAD_BYTES} bytes")
        raise _Bound

    def on_headers_complete(self) -> None:
        self.phase = "body"
        self._head_fed = 0
        parser = self._parser
        upgrade = parser.should_upgrade()
        if upgrade and any(n.lower() == b"transfer-encoding" or (n.lower() == b"content-length" and int(v) > 0)
                           for n, v in self._headers):
            # The parser skips the body of a request that switches protocols and would read it
            # as the next request: a proxy's rules could be bypassed that way. Refused.
            self._refuse(400, "a request asking to upgrade the connection may not have a body")
            raise _Bound
        self._events.append(Head(parser.get_method().decode("latin-1"), self._url.decode("latin-1"),
                                 tuple(self._headers), parser.get_http_version(), upgrade))

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, data: bytes) -> None:
        self._piece_body += len(data)
        self._events.append(Body(data))

    def on_message_complete(self) -> None:
        self.phase = "idle"
        self._completed = True
        self.unanswered += 1
        parser = self._parser
        self._events.append(_ENDS[parser.should_keep_alive(), parser.should_upgrade()])

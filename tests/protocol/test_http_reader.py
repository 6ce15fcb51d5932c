"""protocol/wire/http_reader.py with bytes alone: no socket, no loop, no clock."""
from __future__ import annotations

from seed_agents.protocol.wire.http_reader import (
    CHUNK_FRAMING,
    MAX_HEAD_BYTES,
    Body,
    End,
    Head,
    HttpReader,
    Refused,
    Started,
)

GET = b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n"


def _post(body: bytes, path: bytes = b"/api/message") -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_request_comes_out_as_started_head_body_end():
    events = list(HttpReader().feed(_post(b"hello")))
    assert _kinds(events) == ["Started", "Head", "Body", "End"]
    head = events[1]
    assert (head.method, head.target, head.http_version, head.upgrade) == ("POST", "/api/message", "1.1", False)
    assert (b"Content-Length", b"5") in head.headers
    assert events[2] == Body(b"hello")
    assert events[3] == End(keep_alive=True, upgrade=False)


def test_bytes_one_at_a_time_give_the_same_request():
    reader = HttpReader()
    events = [e for byte in _post(b"hello") for e in reader.feed(bytes([byte]))]
    assert b"".join(e.data for e in events if isinstance(e, Body)) == b"hello"
    assert _kinds([e for e in events if not isinstance(e, Body)]) == ["Started", "Head", "End"]


def test_a_chunked_body_comes_out_de_chunked():
    data = (b"POST /api/message HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    events = list(HttpReader().feed(data))
    assert b"".join(e.data for e in events if isinstance(e, Body)) == b"abcde"
    assert isinstance(events[-1], End)


def test_connection_close_ends_keep_alive():
    events = list(HttpReader().feed(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"))
    assert events[-1] == End(keep_alive=False, upgrade=False)
    events = list(HttpReader().feed(b"GET / HTTP/1.0\r\n\r\n"))
    assert events[-1] == End(keep_alive=False, upgrade=False)


def test_a_head_over_the_bound_is_431_as_soon_as_it_crosses_it():
    reader = HttpReader()
    head = b"GET / HTTP/1.1\r\n" + b"X-Pad: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n"
    events = list(reader.feed(head))   # never completed: refused while it arrives
    assert events[-1].status == 431 and "request head" in events[-1].message
    assert reader.closed
    assert list(reader.feed(GET)) == []   # nothing more is read


def test_a_head_of_many_small_headers_is_bounded_too():
    many = b"".join(b"X-%d: v\r\n" % i for i in range(MAX_HEAD_BYTES // 8))
    events = list(HttpReader().feed(b"GET / HTTP/1.1\r\n" + many + b"\r\n"))
    assert isinstance(events[-1], Refused) and events[-1].status == 431


def test_chunk_framing_past_its_bound_is_431():
    # Chunk extensions are framing, not body: without a bound they would cost nothing to send.
    ext = b";x=" + b"y" * 1000
    chunks = b"".join(b"1" + ext + b"\r\na\r\n" for _ in range(40))
    data = b"POST /api/message HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    assert len(chunks) > MAX_HEAD_BYTES + CHUNK_FRAMING * 40
    events = list(HttpReader().feed(data))
    assert events[-1] == Refused(431, f"chunk framing and trailers over {MAX_HEAD_BYTES} bytes")


def test_garbage_is_400():
    events = list(HttpReader().feed(b"\x16\x03\x01 hello\r\n\r\n"))
    assert isinstance(events[-1], Refused) and events[-1].status == 400
    assert events[-1].message.startswith("malformed HTTP request")


def test_an_upgrade_with_a_body_is_refused():
    data = (b"GET /agents/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Content-Length: 5\r\n\r\nhello")
    events = list(HttpReader().feed(data))
    assert events[-1] == Refused(400, "a request asking to upgrade the connection may not have a body")
    assert not any(isinstance(e, Head) for e in events)


def test_an_upgrade_hands_over_the_bytes_after_it():
    data = (b"GET /agents/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
            b"\x81\x05frame")
    reader = HttpReader()
    events = []
    for event in reader.feed(data):
        events.append(event)
        if isinstance(event, End) and event.upgrade:
            break
    head = events[1]
    assert head.upgrade and head.raw().startswith(b"GET /agents/ws HTTP/1.1\r\nHost: x\r\n")
    assert head.raw().endswith(b"\r\n\r\n")
    assert reader.detach() == b"\x81\x05frame"
    assert list(reader.feed(GET)) == []


def test_an_upgrade_not_taken_reads_on_as_http():
    data = b"GET /elsewhere HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n" + GET
    events = list(HttpReader().feed(data))
    assert [e.target for e in events if isinstance(e, Head)] == ["/elsewhere", "/api/health"]


def test_the_pipeline_bound_stops_reading_until_answers_go_out():
    # Checked between pieces: requests of a piece each make the bound exact.
    big = b"GET / HTTP/1.1\r\nX-Pad: " + b"p" * (4096 - 27) + b"\r\n\r\n"
    assert len(big) == 4096
    reader = HttpReader(pipeline_max=3)
    events = list(reader.feed(big * 10))
    assert sum(isinstance(e, End) for e in events) == 3
    assert reader.paused and reader.buffered
    assert list(reader.feed(b"")) == []   # still paused: nothing answered
    reader.answered()
    assert sum(isinstance(e, End) for e in reader.feed(b"")) == 1
    for _ in range(3):
        reader.answered()
    assert sum(isinstance(e, End) for e in reader.feed(b"")) == 3
    assert reader.buffered   # 3 of 10 still wait


def test_the_caller_stops_at_any_event_and_nothing_after_is_read():
    reader = HttpReader()
    events = reader.feed(_post(b"x" * 100) + GET)
    seen = []
    for event in events:
        seen.append(event)
        if isinstance(event, Head):
            reader.close()   # e.g. a 413 decided on the head
    assert _kinds(seen) == ["Started", "Head"]
    assert not reader.buffered


def test_requests_before_a_refusal_still_come_out():
    events = list(HttpReader().feed(GET + b"NOT HTTP AT ALL\r\n\r\n"))
    assert _kinds(events)[:3] == ["Started", "Head", "End"]
    assert isinstance(events[-1], Refused)


def test_a_large_body_comes_in_bounded_pieces():
    body = b"b" * 300_000
    pieces = [e for e in HttpReader().feed(_post(body)) if isinstance(e, Body)]
    assert b"".join(p.data for p in pieces) == body
    assert max(len(p.data) for p in pieces) <= 64 * 1024
    assert isinstance(Started(), Started)

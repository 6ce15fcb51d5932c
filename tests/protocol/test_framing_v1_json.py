"""v1's JSON text (protocol/wire/framing_v1.py): orjson with the standard library for what
orjson refuses, and the replay's frames made straight from stored bodies. What a desktop parses
is the stored event's value (DAG-JSON for bytes and CIDs), whichever path made the text: a live
event and its replay carry the same value, and the same bytes for the same map."""
from __future__ import annotations

import base64
import json

from seed_agents.protocol.wire import dagcbor, events
from seed_agents.protocol.wire.framing_v1 import V1Framing, dumps, dumps_utf8
from seed_agents.protocol.wire.ws_frame import ws_frame

CID_TEXT = "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"


def as_json_value(value: object) -> object:
    """What a JSON parser gets back from v1's text of `value` (bytes and CIDs as DAG-JSON)."""
    if isinstance(value, dict):
        return {k: as_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json_value(v) for v in value]
    if isinstance(value, bytes):
        return {"/": {"bytes": base64.b64encode(value).decode().rstrip("=")}}
    if type(value).__name__ == "CID":
        return {"/": str(value)}
    return value


def stored_events() -> list[dict]:
    from multiformats import CID

    cid = CID.decode(CID_TEXT)
    return [
        {"id": "e1", "seq": 1, "event": {"content": "plain"}, "createdAt": 1},
        # non-ASCII, quotes, backslashes and control characters
        {"id": "e2", "seq": 2, "event": {"content": "h\u00e9llo \u2603 \"q\" \\ \n\t\x01 \u2028 /"}, "createdAt": 2},
        # floats whose text differs between encoders (the exponent), integers at 64 bits
        {"id": "e3", "seq": 3, "event": {"f": [0.1, 1e16, 1.5e-7, -0.0, 123456789.125, 1e300],
                                         "i": [2 ** 53 + 1, 2 ** 64 - 1, -2 ** 63, 0]}, "createdAt": 3},
        # bytes and a CID, nested
        {"id": "e4", "seq": 4, "event": {"blob": b"\x00\xff\x10", "link": cid, "deep": [[{"x": [None, True]}]]},
         "createdAt": 4},
        # past 64 bits: orjson refuses it, the standard library writes it
        {"id": "e5", "seq": 5, "event": {"huge": -2 ** 64, "n": 1.0}, "createdAt": 5},
        # frames of each WebSocket length form: < 126, < 65536, and the 64-bit length
        {"id": "e6", "seq": 6, "event": {}, "createdAt": 6},
        {"id": "e7", "seq": 7, "event": {"content": "y" * 70_000}, "createdAt": 7},
    ]


def test_v1_text_parses_to_the_values_dag_json():
    for event in stored_events():
        text = dumps(event)
        assert json.loads(text) == as_json_value(event), event["id"]
        assert dumps_utf8(event) == text.encode()
    # compact and non-ASCII unescaped, as before
    assert dumps({"a": [1, "\u00e9"], "b": None}) == '{"a":[1,"\u00e9"],"b":null}'
    # what neither encoder can send still fails
    for bad in ({"x": object()}, {"x": {1, 2}}):
        try:
            dumps(bad)
        except TypeError:
            continue
        raise AssertionError(f"{bad} was sent")


def test_replay_frames_are_each_stored_events_append_as_a_live_event_has_it():
    v1 = V1Framing(1 << 20)
    key = "sessions/abc"
    stored = stored_events()
    rows = [(e["seq"], dagcbor.encode(e)) for e in stored]
    frames, ends = v1.replay_frames(key, rows)
    assert len(ends) == len(rows) and ends[-1] == len(frames)
    starts = [0, *ends[:-1]]
    for event, start, end in zip(stored, starts, ends):
        frame = frames[start:end]
        text = frame[4 if frame[1] == 126 else 10 if frame[1] == 127 else 2:].decode()
        # the value a live subscriber gets (the server's map, its keys in the order it made them)
        live = v1.event(events.append(key, event))
        assert json.loads(text) == json.loads(live) == {"_": "append", "key": key, "event": as_json_value(event)}
        # and the same bytes as the live frame of the stored map (keys in DAG-CBOR's order)
        assert frame == ws_frame(v1.event(events.append(key, dagcbor.decode_trusted(dagcbor.encode(event))))), \
            event["id"]
    # the messages of `replay` are the same text
    assert b"".join(ws_frame(m) for m, _seq in v1.replay(key, rows)) == frames
    assert [seq for _m, seq in v1.replay(key, rows)] == [e["seq"] for e in stored]
    assert v1.replay_frames(key, []) == (b"", [])


def test_a_frame_over_64k_has_the_64_bit_length():
    v1 = V1Framing(1 << 20)
    event = {"id": "big", "seq": 1, "event": {"content": "z" * 70_000}, "createdAt": 1}
    frames, ends = v1.replay_frames("sessions/s", [(1, dagcbor.encode(event))])
    assert frames[:2] == bytes((0x81, 127)) and int.from_bytes(frames[2:10], "big") == len(frames) - 10
    small, _ = v1.replay_frames("sessions/s", [(1, dagcbor.encode({"seq": 1}))])
    assert small[0] == 0x81 and small[1] == len(small) - 2


def test_stored_bodies_decode_alike_whichever_decoder_reads_them():
    from multiformats import CID

    value = {"a": [1, -2 ** 64, 2 ** 64 - 1, 1.5, "\u00e9", b"\x01", None, False], "link": CID.decode(CID_TEXT)}
    encoded = dagcbor.encode(value)
    decoded = dagcbor.decode_trusted(encoded)
    assert decoded == value and str(decoded["link"]) == CID_TEXT
    # bytes cbrrr does not take as canonical (a short float, keys out of order) are still read
    assert dagcbor.decode_trusted(bytes.fromhex("a1616af93e00")) == {"j": 1.5}
    assert dagcbor.decode_trusted(bytes.fromhex("a26162016161 02".replace(" ", ""))) == {"b": 1, "a": 2}


def each_frame(v1: V1Framing, key: str, stored: list[dict]) -> bytes:
    """Every event's frame made alone, as a live frame of the stored map."""
    return b"".join(ws_frame(v1.event(events.append(key, dagcbor.decode_trusted(dagcbor.encode(e))))) for e in stored)


def test_frames_of_a_run_are_the_same_bytes_on_each_of_its_paths():
    """`frames_of` makes a run's frames without a Python step per event when it can (plain
    events; bytes and CIDs through orjson's default), and event by event when it cannot (an
    integer past 64 bits, a frame under 126 bytes or over 65535): the same frames either way."""
    from multiformats import CID

    v1, key = V1Framing(1 << 20), "sessions/0b6c5f0a-7a0e-4d0e-9a61-3f0a6b3a9b11"

    def run(n: int, **extra) -> list[dict]:
        return [{"id": f"e{i}", "seq": i, "createdAt": 1_700_000_000_000 + i,
                 "event": {"type": "message", "content": f"h\u00e9llo \"{i}\" \\ \u2603 " + "x" * (i % 90), **extra}}
                for i in range(1, n + 1)]

    cases = {
        "plain": run(200),
        "bytes and a CID": run(50, blob=b"\x00\xff", link=CID.decode(CID_TEXT)),
        "past 64 bits": run(20, huge=-2 ** 64),
        "short frames": [{"seq": i} for i in range(1, 6)],
        "over 64k": run(3, content="z" * 70_000),
        "one": run(1),
        "none": [],
    }
    for name, stored in cases.items():
        frames, ends = v1.frames_of(key, [dagcbor.decode_trusted(dagcbor.encode(e)) for e in stored])
        assert frames == each_frame(v1, key, stored), name
        lengths = [len(each_frame(v1, key, [e])) for e in stored]
        assert ends == [sum(lengths[:i + 1]) for i in range(len(stored))], name
        # and what `replay_frames` makes of the stored rows
        assert v1.replay_frames(key, [(e.get("seq", 0), dagcbor.encode(e)) for e in stored]) == (frames, ends), name


def test_stored_bodies_one_after_the_other_decode_as_a_page():
    stored = [{"id": f"e{i}", "seq": i, "event": {"n": i}, "createdAt": i} for i in range(1, 30)]
    joined = b"".join(dagcbor.encode(e) for e in stored)
    assert V1Framing.decode_bodies(len(stored), joined) == stored
    assert V1Framing.decode_bodies(0, b"") == []


def test_stored_bodies_decode_loosely_alike_but_for_a_cid():
    """The replay's faster page decoder (libipld) gives the values `decode_trusted` gives, but a
    CID comes back as its bytes (the replay then decodes that page again exactly); it refuses
    what is not canonical, and says None for a count that is not the items'."""
    from multiformats import CID

    values = [{"id": f"e{i}", "seq": i, "event": {"n": [i, -2 ** 64, 2 ** 64 - 1, 1.5, "\u00e9", None, True, b"\x01"]},
               "createdAt": i} for i in range(1, 6)]
    joined = b"".join(dagcbor.encode(v) for v in values)
    assert dagcbor.decode_trusted_many_loose(5, joined) == values == V1Framing.decode_bodies_loose(5, joined)
    assert dagcbor.decode_trusted_many_loose(4, joined) is None
    assert dagcbor.decode_trusted_many_loose(1, bytes.fromhex("a1616af93e00")) is None   # a short float
    assert dagcbor.decode_trusted_many_loose(1, b"\xff") is None
    link = CID.decode(CID_TEXT)
    loose = dagcbor.decode_trusted_many_loose(1, dagcbor.encode({"l": link}))
    assert loose is not None and type(loose[0]["l"]) is bytes and loose[0]["l"] == bytes(link)
    # frames_of_loose says None for events holding bytes (a CID may hide there), else frames_of's frames
    v1 = V1Framing(1 << 20)
    assert v1.frames_of_loose("sessions/s", loose) is None
    plain = [{"id": "a", "seq": 1, "event": {"content": "x" * 100}, "createdAt": 1}]
    assert v1.frames_of_loose("sessions/s", plain) == v1.frames_of("sessions/s", plain)

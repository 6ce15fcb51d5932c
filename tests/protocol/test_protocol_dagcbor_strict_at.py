"""dagcbor.decode_strict_at / decode_strict_run (cbrrr's strict C decoder): what they accept is
exactly the canonical encoding of the value they return, so a client may keep the bytes as
proved canonical without encoding them again (clients/wire.read_frame)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multiformats import CID

from seed_agents.protocol.wire.dagcbor import decode, decode_canonical, decode_strict_at, decode_strict_run, encode

from tests.vectors import same

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CID_TEXT = "bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae"
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1)
          | st.floats(allow_nan=False, allow_infinity=False) | text | st.binary(max_size=40)
          | st.just(CID.decode(CID_TEXT)))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(text, inner, max_size=6),
                      max_leaves=30)


@SETTINGS
@given(values)
def test_a_canonical_encoding_reads_back_as_its_value_and_its_length(value):
    data = encode(value)
    back, end = decode_strict_at(data)
    assert end == len(data) and same(back, value) and same(back, decode(data))
    # At an offset, in a run, with other items after it: the same value and its own bytes.
    values_, parts, after = decode_strict_run(b"\x01" + data + data + b"\xf6", 1, 2)
    assert after == 1 + 2 * len(data) and parts == [data, data]
    assert all(same(v, value) for v in values_)


def _accepted(data: bytes) -> object | None:
    try:
        value, end = decode_strict_at(data)
    except Exception:  # noqa: BLE001  (any refusal)
        return None
    return value if end == len(data) else None


@SETTINGS
@given(values, st.data())
def test_what_it_accepts_is_canonical_even_after_a_byte_is_changed(value, draw):
    data = bytearray(encode(value))
    at = draw.draw(st.integers(0, len(data) - 1))
    data[at] = draw.draw(st.integers(0, 255))
    data = bytes(data)
    back = _accepted(data)
    if back is not None:   # accepted: then it was the canonical encoding of what came back
        assert encode(back) == data
        assert decode_canonical(data, max_items=None)[1] is True


@SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes_are_accepted_only_when_canonical(data):
    back = _accepted(data)
    if back is not None:
        assert encode(back) == data


K = encode  # a key or a value's canonical bytes, for the hand-made cases below

FORBIDDEN = {
    # integers, lengths and counts in a longer head than needed
    "an integer in a longer head": b"\x18\x01",
    "a negative integer in a longer head": b"\x38\x01",
    "a 64-bit head for a small integer": b"\x1b" + (5).to_bytes(8, "big"),
    "a text length in a longer head": b"\x78\x01a",
    "a byte string length in a longer head": b"\x58\x01a",
    "an array count in a longer head": b"\x98\x01\x01",
    "a map count in a longer head": b"\xb8\x01" + K("a") + b"\x01",
    # map keys
    "keys out of order (length)": b"\xa2" + K("bb") + b"\x01" + K("a") + b"\x02",
    "keys out of order (bytes)": b"\xa2" + K("b") + b"\x01" + K("a") + b"\x02",
    "a duplicate key": b"\xa2" + K("a") + b"\x01" + K("a") + b"\x02",
    "an integer key": b"\xa1\x01\x01",
    "a byte string key": b"\xa1\x41a\x01",
    # floats
    "a 16-bit float": b"\xf9\x3c\x00",
    "a 32-bit float": b"\xfa\x3f\x80\x00\x00",
    "NaN": b"\xfb\x7f\xf8\x00\x00\x00\x00\x00\x00",
    "infinity": b"\xfb\x7f\xf0\x00\x00\x00\x00\x00\x00",
    "minus infinity": b"\xfb\xff\xf0\x00\x00\x00\x00\x00\x00",
    # indefinite lengths
    "an indefinite array": b"\x9f\x01\xff",
    "an indefinite map": b"\xbf" + K("a") + b"\x01\xff",
    "an indefinite text": b"\x7f" + K("a") + b"\xff",
    "an indefinite byte string": b"\x5f\x41a\xff",
    "a break byte alone": b"\xff",
    # simple values and tags
    "undefined": b"\xf7",
    "a simple value": b"\xf0",
    "a two-byte simple value": b"\xf8\x20",
    "a tag other than 42": b"\xc1\x01",
    "tag 42 around text": b"\xd8\x2a" + K("a"),
    "tag 42 without its zero byte": b"\xd8\x2a\x42\x01\x02",
    "tag 42 around no CID": b"\xd8\x2a\x43\x00\x01\x02",
    "tag 42 around a CID with bytes after it": b"\xd8\x2a\x58\x26\x00" + bytes(CID.decode(CID_TEXT)) + b"\x00",
    # text
    "invalid UTF-8": b"\x62\xff\xfe",
    "an encoded surrogate": b"\x63\xed\xa0\x80",
    # truncation
    "an empty input": b"",
    "a text cut short": b"\x62a",
    "an array cut short": b"\x82\x01",
}


@pytest.mark.parametrize("data", list(FORBIDDEN.values()), ids=list(FORBIDDEN))
def test_everything_dag_cbor_forbids_is_refused(data):
    with pytest.raises(ValueError):
        decode_strict_at(data)
    with pytest.raises(ValueError):
        decode_strict_run(b"\xf6" + data, 0, 2)


def test_bytes_after_the_item_are_left_to_the_caller():
    value, end = decode_strict_at(b"\x01\x02")
    assert (value, end) == (1, 1)   # the caller compares `end` with the input's length


def test_a_cid_comes_back_as_decode_gives_it():
    data = encode({"link": CID.decode(CID_TEXT)})
    value, _ = decode_strict_at(data)
    assert value == decode(data) and str(value["link"]) == CID_TEXT


def test_nesting_is_walked_without_the_c_stack():
    # cbrrr keeps its own stack: a frame's depth cannot crash the client (it is bounded by size).
    deep = b"\x81" * 100_000 + b"\x01"
    value, end = decode_strict_at(deep)
    assert end == len(deep) and type(value) is list

"""Property tests: DAG-CBOR round trips, key order, hostile bytes, mutated envelopes, nesting."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seed_agents.protocol.wire._dagcbor_strict import strict_decode
from seed_agents.protocol.wire.dagcbor import DagCborError, decode, decode_canonical, encode
from seed_agents.protocol.wire.envelope import VerifiedEnvelope, sign_envelope, verify_envelope
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.keys import Keypair

from tests.vectors import same

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1)
          | st.floats(allow_nan=False, allow_infinity=False) | text | st.binary(max_size=40))
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(text, inner, max_size=6),
    max_leaves=30,
)


def shuffled(value: object, rng: random.Random) -> object:
    """The same value with every map's insertion order shuffled."""
    if type(value) is dict:
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if type(value) is list:
        return [shuffled(v, rng) for v in value]
    return value


@SETTINGS
@given(values)
def test_roundtrip(value):
    data = encode(value)
    assert same(decode(data), value)  # floats compared bit for bit: 2.0 stays 2.0, -0.0 stays
    assert decode_canonical(data)[1] is True
    assert same(strict_decode(data, 64), value)


@SETTINGS
@given(values, st.randoms(use_true_random=False))
def test_encoding_ignores_insertion_order(value, rng):
    assert encode(shuffled(value, rng)) == encode(value)


@SETTINGS
@given(values, st.randoms(use_true_random=False))
def test_unsorted_frames_decode_to_the_same_value(value, rng):
    import cbor2  # its non-canonical mode keeps insertion order and writes float64

    try:
        loose = cbor2.dumps(shuffled(value, rng))
    except Exception:
        return
    decoded, _ = decode_canonical(loose)
    assert same(decoded, value)
    assert encode(decoded) == encode(value)


def check_decode(data: bytes) -> None:
    """decode either refuses with DagCborError or agrees with the strict reader."""
    try:
        value, canonical = decode_canonical(data)
    except DagCborError as err:
        assert err.status in (400, 413)
        try:
            strict_decode(data, 64)
        except DagCborError:
            return
        raise AssertionError("fast path refused what the strict reader accepts") from None
    assert same(strict_decode(data, 64), value)
    assert (encode(value) == data) is canonical


@SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes(data):
    check_decode(data)


@st.composite
def mutated(draw, source: st.SearchStrategy[bytes]) -> bytes:
    data = bytearray(draw(source))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = bytes([draw(st.integers(0, 255))])
        elif kind == "delete" and data:
            del data[at]
        elif kind == "truncate":
            del data[at:]
    return bytes(data)


@SETTINGS
@given(mutated(values.map(encode)))
def test_mutated_encodings(data):
    check_decode(data)


KEY = Keypair.from_seed(bytes(range(32)))
T = 1_767_225_600_000
ACTIONS = st.fixed_dictionaries({
    "_": st.sampled_from(["MessageSession", "GetSession", "ListAgents"]),
    "sessionId": text,
    "content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}),
                        max_size=3),
    "n": st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False),
})


@st.composite
def envelope_and_mutation(draw):
    action = draw(ACTIONS)
    frame = sign_envelope(KEY, action, ts=T)
    return action, frame, draw(mutated(st.just(frame)))


@SETTINGS
@given(envelope_and_mutation())
def test_mutated_envelopes(case):
    action, frame, data = case
    try:
        decoded = decode(data)
    except DagCborError:
        decoded = None
    try:
        verified = verify_envelope(data, now_ms=T)
    except ProtocolError as err:
        assert err.status in (400, 401, 413)
        if decoded is not None:  # the map path (v2) answers the same
            with pytest.raises(ProtocolError) as again:
                verify_envelope(decoded, now_ms=T)
            assert again.value.status == err.status
        return
    assert verify_envelope(decoded, now_ms=T) == verified  # the fast path agrees with the map path
    # Accepted: then it is the signed envelope, perhaps re-encoded (e.g. a float32 that is
    # exact), never a changed one.
    assert isinstance(verified, VerifiedEnvelope)
    assert encode(verified.action) == encode({**action, "ts": T})
    assert verified.signer == verified.account == KEY.principal


@SETTINGS
@given(st.integers(1, 100), st.sampled_from(["array", "map"]), st.integers(1, 80))
def test_nesting_depth_bound(depth, kind, limit):
    head = b"\x81" if kind == "array" else b"\xa1\x61k"
    data = head * depth + b"\x00"
    try:
        decode(data, max_depth=limit)
        accepted = True
    except DagCborError as err:
        assert "nested deeper" in err.message
        accepted = False
    assert accepted is (depth <= limit)

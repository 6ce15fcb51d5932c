"""DAG-CBOR against the reference vectors (dag-cbor.json), plus the limits of the decoder."""
from __future__ import annotations

import datetime
import enum
import math

import cbor2
import pytest
from multiformats import CID

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire._dagcbor_encode import ENCODE_MAX_DEPTH
from seed_agents.protocol.wire._dagcbor_strict import strict_decode
from seed_agents.protocol.wire.dagcbor import DagCborError, decode, decode_canonical, encode
from seed_agents.protocol.wire.errors import ProtocolError

from tests.vectors import UNDEFINED, from_tagged, load, same

VECTORS = load("dag-cbor")
CASES = VECTORS["cases"]
REJECTS = VECTORS["rejects"]
ACCEPTED = {c["name"]: c for c in VECTORS["acceptedByDecoder"]}


def ids(cases: list[dict]) -> list[str]:
    return [c["name"] for c in cases]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_encode_matches_reference_bytes(case):
    assert encode(from_tagged(case["value"])).hex() == case["hex"]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_decode_gives_the_value_back(case):
    data = bytes.fromhex(case["hex"])
    value = from_tagged(case["value"])
    assert same(decode(data), value)
    assert decode_canonical(data)[1] is True  # every reference encoding is canonical
    assert same(strict_decode(data, 64), value)  # the slow path agrees with the fast one


@pytest.mark.parametrize("case", REJECTS, ids=ids(REJECTS))
def test_rejects(case):
    data = bytes.fromhex(case["hex"])
    with pytest.raises(DagCborError) as err:
        decode(data)
    assert err.value.status == 400
    assert isinstance(err.value, ProtocolError)
    assert "DAG-CBOR" in err.value.message
    with pytest.raises(DagCborError):
        strict_decode(data, 64)


@pytest.mark.parametrize("name", ["undefined (0xf7)", "undefined as map value",
                                  "invalid UTF-8 in text string", "invalid UTF-8 in map key"])
def test_contract_refuses_what_js_tolerates(name):
    # The reference decoder turns these into null / U+FFFD; the contract says refuse (400).
    with pytest.raises(DagCborError) as err:
        decode(bytes.fromhex(ACCEPTED[name]["hex"]))
    assert err.value.status == 400
    text = err.value.message
    assert ("undefined" in text) if "undefined" in name else ("UTF-8" in text)


@pytest.mark.parametrize("name", ["unsorted keys (b before a)", "unsorted keys (longer key first)",
                                  "float16 1.5", "float32 1.5"])
def test_tolerated_non_canonical_inputs_reencode_canonically(name):
    case = ACCEPTED[name]
    value, canonical = decode_canonical(bytes.fromhex(case["hex"]))
    assert canonical is False
    assert same(value, from_tagged(case["jsDecodesTo"]))
    assert encode(value).hex() == case["reencodedHex"]


@pytest.mark.parametrize("name", ["float64 2.0 (integral)", "float64 -0.0",
                                  "float64 2^53 (integral, above safe range)",
                                  "tag 42 with valid CID"])
def test_canonical_accepted_inputs_keep_their_bytes(name):
    # A typed decoder keeps 2.0 a float, so it re-encodes to the same bytes (JS turns it into 02).
    data = bytes.fromhex(ACCEPTED[name]["hex"])
    value, canonical = decode_canonical(data)
    assert canonical is True
    assert encode(value) == data
    if name.startswith("float"):
        assert type(value) is float


def test_every_accepted_by_decoder_case_is_covered():
    covered = 4 + 4 + 4
    assert len(ACCEPTED) == covered


def test_js_quirks_have_typed_answers():
    quirks = {q["name"]: q for q in VECTORS["jsQuirks"]}
    assert len(quirks) == 11  # each is handled below
    assert encode(2.0).hex() == "fb4000000000000000"  # not 02 as JS writes it
    assert encode(-0.0).hex() == "fb8000000000000000"  # not 00
    assert encode(2**53).hex() == "1b0020000000000000"  # a Python int stays an int
    assert encode(float(2**53)).hex() == quirks["JS number 2^53 vs bigint 2^53"]["hex"]
    for bad in (UNDEFINED, {"a": UNDEFINED, "b": 1}, math.nan, math.inf, -math.inf, 2**64,
                {1: 2}, {"": 1, 2: 3}):
        with pytest.raises(DagCborError) as err:
            encode(bad)
        assert err.value.status == 400
    assert encode({"": 1}).hex() == "a16001"  # the empty key is fine in a map


@pytest.mark.parametrize("value", [
    {1, 2}, frozenset(), datetime.datetime(2026, 1, 1), cbor2.CBORTag(1, 0), cbor2.undefined,
    cbor2.CBORSimpleValue(16), object(), {"a": {"b": [1, b"x", {True: 1}]}}, "\ud800",
    {"k": "bad \udfff surrogate"}, enum.IntEnum("E", "A").A, 1.0j, bytes, Ellipsis,
], ids=lambda v: "object()" if type(v) is object else repr(v))   # ids the same in every process (xdist)
def test_encode_refuses_non_plain_values(value):
    with pytest.raises(DagCborError):
        encode(value)


def test_encode_accepts_tuples_as_arrays_and_byte_buffers_as_bytes():
    assert encode((1, (2,))) == encode([1, [2]])
    assert encode(bytearray(b"ab")) == encode(b"ab") == encode(memoryview(b"ab"))


def test_encode_refuses_runaway_nesting_and_cycles():
    deep: list = []
    for _ in range(ENCODE_MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(DagCborError):
        encode(deep)
    cyclic: dict = {}
    cyclic["self"] = cyclic
    with pytest.raises(DagCborError):
        encode(cyclic)


def test_cid_roundtrip_and_base32_string():
    cid = CID.decode("bafyreidykglsfhoixmivffc5uwhcgshx4j465xwqntbmu43nb2dzqwfvae")
    data = encode({"link": cid})
    back = decode(data)["link"]
    assert back == cid and str(back).startswith("bafy")


@pytest.mark.parametrize("hexdata, fragment", [
    ("d82a4100", "CID"),  # prefix only, no CID
    ("d82a6161", "byte string"),  # tag 42 around text
    ("d82a45000102030405"[:14], "CID"),
    ("d829450001020304", "tag 41"),
], ids=["empty cid", "text in tag 42", "garbage cid", "tag 41"])
def test_bad_links(hexdata, fragment):
    with pytest.raises(DagCborError) as err:
        decode(bytes.fromhex(hexdata))
    assert fragment in err.value.message


def test_size_limit_is_413():
    data = encode("x" * 100)
    assert decode(data, max_size=len(data)) == "x" * 100
    with pytest.raises(DagCborError) as err:
        decode(data, max_size=len(data) - 1)
    assert err.value.status == 413


def nested(depth: int, kind: str) -> bytes:
    head = b"\x81" if kind == "array" else b"\xa1\x61k"
    return head * depth + b"\x00"


@pytest.mark.parametrize("kind", ["array", "map"])
def test_depth_limit(kind):
    assert decode(nested(64, kind)) is not None
    assert decode(nested(10, kind), max_depth=10) is not None
    for data, limit in ((nested(65, kind), 64), (nested(11, kind), 10), (nested(401, kind), 64)):
        with pytest.raises(DagCborError) as err:
            decode(data, max_depth=limit)
        assert err.value.status == 400 and "nested deeper" in err.value.message
        with pytest.raises(DagCborError):
            strict_decode(data, limit)


def test_deep_input_with_a_huge_depth_limit_is_still_a_dagcbor_error():
    data = b"\x81" * 200_000 + b"\x00"
    with pytest.raises(DagCborError):
        decode(data, max_size=1 << 20, max_depth=10**9)


@pytest.mark.parametrize("hexdata", [
    "5bffffffffffffffff", "7bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff",
    "9b00000000ffffffff01", "ba7fffffff6161", "5a7fffffff00", "82", "a1", "d82a",
])
def test_huge_declared_lengths_fail_cleanly(hexdata):
    with pytest.raises(DagCborError) as err:
        decode(bytes.fromhex(hexdata))
    assert err.value.status == 400


@pytest.mark.parametrize("hexdata", [
    "fb7ff0000000000001",  # NaN with a payload
    "fa7f800000",  # float32 +inf
    "f9fc00",  # float16 -inf
    "d81c8100",  # cbor2 shareable tag: refused like every tag but 42
    "82d81c6161d81d00",  # shared reference
    "d9d9f7a0",  # self-describe
    "c249010000000000000000",  # bignum 2^64
    "a2616101616101",  # duplicate keys, same value
    "f818",
], ids=lambda h: h)
def test_inputs_cbor2_accepts_but_dagcbor_does_not(hexdata):
    with pytest.raises(DagCborError):
        decode(bytes.fromhex(hexdata))


def test_decode_input_types():
    assert decode(bytearray(b"\x01")) == 1
    assert decode(memoryview(b"\x02")) == 2
    with pytest.raises(DagCborError):
        decode("a0")  # text is not bytes


def test_public_module_names():
    assert dagcbor.DagCborError is DagCborError
    assert issubclass(DagCborError, ProtocolError)
    err = DagCborError(413, "too big")
    assert (err.status, err.message, str(err)) == (413, "too big", "too big")
    assert DagCborError("plain").status == 400


def test_caches_stay_bounded():
    from seed_agents.protocol.wire import _dagcbor_encode as enc

    big = {f"k{i}": i for i in range(1000)}
    assert decode(encode(big)) == big
    assert tuple(big) not in enc._order_cache  # only small key sets are remembered
    for i in range(2 * enc._CACHE_LIMIT):
        encode({f"key-{i}": f"value-{i}"})
    assert len(enc._order_cache) <= enc._CACHE_LIMIT
    assert len(enc._str_cache) <= enc._CACHE_LIMIT
    encode("x" * 1000)
    assert "x" * 1000 not in enc._str_cache


def test_shortest_head_at_reads_back_what_encode_head_writes_and_nothing_longer():
    from seed_agents.protocol.wire.dagcbor import encode_head, shortest_head_at

    for major in (0, 4):
        for n in (0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1):
            head = encode_head(major, n)
            assert shortest_head_at(b"x" + head + b"y", 1, major) == (n, 1 + len(head))
            assert shortest_head_at(head, 0, 4 - major) is None   # another type
            assert shortest_head_at(head[:-1], 0, major) is None   # cut short
    assert shortest_head_at(b"\x18\x17", 0, 0) is None               # 23 in the 1-byte form
    assert shortest_head_at(b"\x19\x00\xff", 0, 0) is None           # 255 in the 2-byte form
    assert shortest_head_at(b"\x9f", 0, 4) is None                   # indefinite array
    assert shortest_head_at(b"\x1c", 0, 0) is None                   # reserved
    assert shortest_head_at(b"", 0, 0) is None

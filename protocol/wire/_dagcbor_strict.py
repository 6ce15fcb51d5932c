"""Strict pure-Python DAG-CBOR reader (internal; use `seed_agents.protocol.wire.dagcbor.decode`).

It is the authority on what is accepted and the source of every decode error message. It is only
run when the fast path (cbor2's C decoder, then a byte-exact canonical re-encode) does not
confirm the input, so it favours exact messages over speed. Liberal in what the contract allows
(map keys out of order, float16/float32), strict about everything else. Every declared length is
checked against the bytes that remain before anything is allocated, and nesting is bounded, so no
input can make it raise anything but DagCborError.
"""

from __future__ import annotations

import math
import struct

from multiformats import CID

from .errors import DagCborError, quote

_unpack_f64 = struct.Struct(">d").unpack_from
_unpack_f32 = struct.Struct(">f").unpack_from
_unpack_f16 = struct.Struct(">e").unpack_from

_MAJOR_NAMES = ("unsigned integer", "negative integer", "byte string", "text string",
                "array", "map", "tag", "simple value or float")
_A_MAJOR = ("an unsigned integer", "a negative integer", "a byte string", "a text string",
            "an array", "a map", "a tag", "a simple value or float")
_MIN_FOR_WIDTH = {24: 24, 25: 0x100, 26: 0x10000, 27: 0x100000000}
_WIDTH = {24: 1, 25: 2, 26: 4, 27: 8}


def cid_from_link_bytes(raw: bytes) -> CID:
    """The CID in tag 42 content (0x00 then the binary CID). CIDv1 is given the base32 string
    form ('bafy...') that IPLD tools print; the binary form, and so the encoding, is unchanged."""
    cid = CID.decode(raw[1:])
    return cid.set(base="base32") if cid.version == 1 else cid


class _Reader:
    __slots__ = ("data", "n", "max_depth")

    def __init__(self, data: bytes, max_depth: int) -> None:
        self.data = data
        self.n = len(data)
        self.max_depth = max_depth

    def fail(self, message: str, at: int) -> DagCborError:
        return DagCborError(400, f"invalid DAG-CBOR at byte {at}: {message}")

    def need(self, at: int, count: int, what: str) -> None:
        if count > self.n - at:
            raise self.fail(f"input ends inside {what} (needs {count} more bytes, "
                            f"{self.n - at} left)", at)

    def head(self, at: int) -> tuple[int, int, int]:
        """(major type, argument, offset after the head) for the item starting at `at`."""
        if at >= self.n:
            raise self.fail("input ends where an item was expected", at)
        initial = self.data[at]
        major, info = initial >> 5, initial & 0x1F
        if info < 24:
            return major, info, at + 1
        if major == 7:
            return major, info, at + 1  # floats and simple values: the caller reads the payload
        if info == 31:
            raise self.fail(f"indefinite-length {_MAJOR_NAMES[major]}; DAG-CBOR allows "
                            "definite lengths only", at)
        if info > 27:
            raise self.fail(f"reserved additional information {info} in the head of "
                            f"{_A_MAJOR[major]}", at)
        width = _WIDTH[info]
        self.need(at + 1, width, "an integer or length")
        arg = int.from_bytes(self.data[at + 1:at + 1 + width], "big")
        if arg < _MIN_FOR_WIDTH[info]:
            raise self.fail(f"{_MAJOR_NAMES[major]} head uses {width + 1} bytes for the value "
                            f"{arg}; DAG-CBOR requires the shortest form", at)
        return major, arg, at + 1 + width

    def text(self, start: int, length: int, what: str) -> tuple[str, int]:
        self.need(start, length, what)
        end = start + length
        try:
            return self.data[start:end].decode("utf-8"), end
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte "
                            f"{start + e.start})", start) from None

    def item(self, at: int, depth: int) -> tuple[object, int]:
        major, arg, pos = self.head(at)
        if major == 0:
            return arg, pos
        if major == 1:
            return -1 - arg, pos
        if major == 2:
            self.need(pos, arg, "a byte string")
            return self.data[pos:pos + arg], pos + arg
        if major == 3:
            return self.text(pos, arg, "a text string")
        if major == 4:
            return self.array(at, arg, pos, depth)
        if major == 5:
            return self.map(at, arg, pos, depth)
        if major == 6:
            return self.tag(at, arg, pos)
        return self.simple(at, arg, pos)

    def enter(self, at: int, depth: int) -> int:
        if depth >= self.max_depth:
            raise self.fail(f"containers nested deeper than {self.max_depth} levels", at)
        return depth + 1

    def array(self, at: int, count: int, pos: int, depth: int) -> tuple[list, int]:
        depth = self.enter(at, depth)
        self.need(pos, count, f"an array of {count} items")  # every item takes at least a byte
        out = []
        for _ in range(count):
            value, pos = self.item(pos, depth)
            out.append(value)
        return out, pos

    def map(self, at: int, count: int, pos: int, depth: int) -> tuple[dict, int]:
        depth = self.enter(at, depth)
        self.need(pos, 2 * count, f"a map of {count} entries")
        out: dict = {}
        for _ in range(count):
            key_at = pos
            major, length, pos = self.head(pos)
            if major != 3:
                raise self.fail(f"map key is {_A_MAJOR[major]}; DAG-CBOR map keys must "
                                "be text strings", key_at)
            key, pos = self.text(pos, length, "a map key")
            if key in out:
                raise self.fail(f"duplicate map key {quote(key)}", key_at)
            # Keys out of canonical order are accepted here: the frame is decoded and then
            # verified over its canonical re-encoding (contract section 2).
            value, pos = self.item(pos, depth)
            out[key] = value
        return out, pos

    def tag(self, at: int, number: int, pos: int) -> tuple[CID, int]:
        if number != 42:
            raise self.fail(f"tag {number} is not allowed; DAG-CBOR allows only tag 42 (CID)", at)
        major, length, start = self.head(pos)
        if major != 2:
            raise self.fail(f"tag 42 must wrap a byte string, found {_A_MAJOR[major]}", pos)
        self.need(start, length, "a CID")
        raw = self.data[start:start + length]
        if not raw or raw[0] != 0:
            raise self.fail("tag 42 CID bytes must start with the 0x00 multibase prefix", start)
        try:
            cid = cid_from_link_bytes(raw)
        except Exception as e:  # multiformats raises several types; all mean "not a CID"
            raise self.fail(f"tag 42 does not hold a valid binary CID ({str(e)[:120]})", start) from None
        return cid, start + length

    def simple(self, at: int, info: int, pos: int) -> tuple[object, int]:
        if info == 20:
            return False, pos
        if info == 21:
            return True, pos
        if info == 22:
            return None, pos
        if info == 23:
            raise self.fail("CBOR undefined (0xf7) is not allowed; omit the key or use null", at)
        if info in (25, 26, 27):
            width = {25: 2, 26: 4, 27: 8}[info]
            self.need(pos, width, "a float")
            unpack = {25: _unpack_f16, 26: _unpack_f32, 27: _unpack_f64}[info]
            value = unpack(self.data, pos)[0]
            if not math.isfinite(value):
                raise self.fail(f"float {value} is not allowed; DAG-CBOR has no NaN or "
                                "infinities", at)
            return value, pos + width  # short floats widen to Python floats (re-encoded as 64-bit)
        if info == 31:
            raise self.fail("unexpected break byte (0xff); indefinite lengths are not allowed", at)
        if info in (28, 29, 30):
            raise self.fail(f"reserved additional information {info} in a simple value", at)
        number = self.data[pos] if info == 24 and pos < self.n else info
        raise self.fail(f"simple value {number} is not allowed in DAG-CBOR", at)


def strict_decode(data: bytes, max_depth: int) -> object:
    """Decode one DAG-CBOR item that fills `data` exactly; DagCborError(400) otherwise."""
    if not data:
        raise DagCborError(400, "invalid DAG-CBOR: empty input, expected one item")
    reader = _Reader(data, max_depth)
    try:
        value, end = reader.item(0, 0)
    except RecursionError:  # only reachable when a caller passes a huge max_depth
        raise DagCborError(400, "invalid DAG-CBOR: containers nested too deeply") from None
    if end != len(data):
        raise reader.fail(f"{len(data) - end} trailing bytes after the first item", end)
    return value

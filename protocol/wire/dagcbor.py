"""Strict DAG-CBOR (IPLD): the only encoding anything is signed in.

`encode` writes the canonical form: map keys sorted by encoded length then bytewise, shortest
integer and length heads, every float as float64, only tag 42 (CID), no NaN/infinity/undefined.

`decode` is liberal only where the contract says so (section 2): map keys out of order and
float16/float32 are accepted (the signature is checked over the canonical re-encoding anyway).
Everything else that is not DAG-CBOR is refused with DagCborError(400), or 413 when the input is
over `max_size`. Floats stay floats, so a canonical input re-encodes to the same bytes.

Speed: cbor2's C decoder reads the bytes, and the input is accepted at once if our canonical
encoding of the result equals it byte for byte (then it was canonical, so it passes every strict
rule: our encoder only writes valid DAG-CBOR and refuses cbor2's extra types such as undefined,
simple values, datetimes or tags). Anything else goes to the strict pure-Python reader, which
accepts the tolerated forms or raises the precise error.
"""

from __future__ import annotations

import cbor2
import cbrrr
import libipld
from cbrrr import _cbrrr

from ._dagcbor_encode import _encode_into, _head, encode
from ._dagcbor_strict import cid_from_link_bytes, strict_decode
from .errors import DagCborError

__all__ = ["DagCborError", "encode", "decode", "decode_canonical", "decode_if_canonical", "check_items"]

DEFAULT_MAX_SIZE = 1 << 20
DEFAULT_MAX_DEPTH = 64
# The strict reader is pure Python: a hostile non-canonical megabyte of tiny items would cost
# it about half a second. Canonical input of any size takes the C fast path; non-canonical
# input (unsorted keys, short floats: the liberal cases of CONTRACT section 2) must be small.
STRICT_MAX_SIZE = 64 * 1024
# Items (CBOR heads: every value, key, array and map) one input may hold. Decoding costs per item,
# not per byte: a megabyte of empty maps is a million Python objects and most of a second of
# CPU to decode and re-encode. Since an item takes at least a byte, only inputs longer than
# this are counted (`check_items`), before anything is decoded.
DEFAULT_MAX_ITEMS = 16 * 1024

_loads = cbor2.loads
_cbrrr_decode = cbrrr.decode_dag_cbor
_cbrrr_item = _cbrrr.decode_dag_cbor   # (value, bytes read): one item from the start of a buffer
_libipld_many = libipld.decode_dag_cbor_multi
_CBORTag = cbor2.CBORTag


def _tag_hook(first: object, second: object) -> object:
    # Fast path only: a well-formed tag 42 becomes a CID; anything else stays a CBORTag, which
    # the encoder refuses, so the strict reader gets to name the problem. cbor2 6 calls
    # hook(tag, immutable), cbor2 5 hook(decoder, tag): take whichever is the tag.
    tag = first if type(first) is _CBORTag else second
    if tag.tag == 42:
        raw = tag.value
        if type(raw) is bytes and raw[:1] == b"\x00":
            try:
                return cid_from_link_bytes(raw)
            except Exception:
                pass
    return tag


def _as_bytes(data: object) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise DagCborError(400, f"expected DAG-CBOR bytes, got {type(data).__name__}")


def check_items(data: bytes, max_items: int = DEFAULT_MAX_ITEMS) -> None:
    """DagCborError(400) when `data` holds more than `max_items` items. A flat walk over the
    heads (strings' contents are skipped), which stops at the bound: at most `max_items` steps.
    Malformed input is left for the decoder to refuse."""
    if len(data) <= max_items:
        return
    pos, end, n = 0, len(data), 0
    while pos < end:
        n += 1
        if n > max_items:
            raise DagCborError(400, f"input holds more than {max_items} items (values, keys, arrays "
                                    "and maps); the limit is per envelope")
        head = data[pos]
        info = head & 0x1F
        pos += 1
        if info < 24:
            arg = info
        elif info < 28:
            width = 1 << (info - 24)
            arg = int.from_bytes(data[pos:pos + width], "big")
            pos += width
        else:
            return   # indefinite lengths and reserved values: the decoder refuses them
        if head >> 5 in (2, 3):   # byte and text strings: skip the content
            pos += arg


def peek_text(data: bytes, key: str, max_items: int = 1024) -> str | None:
    """The text value of `key` in a DAG-CBOR map, read from its bytes without decoding the rest
    (its other values are skipped head by head, strings' contents unread); None when the map
    has no such text, is not a map, or `key` is not found within `max_items` items. For names
    in listings: a stored definition of thousands of items costs a few steps."""
    want = key.encode()
    end = len(data)

    def head(pos: int) -> tuple[int, int, int]:
        first = data[pos]
        info = first & 0x1F
        if info < 24:
            return first >> 5, info, pos + 1
        if info < 28:
            width = 1 << (info - 24)
            return first >> 5, int.from_bytes(data[pos + 1:pos + 1 + width], "big"), pos + 1 + width
        raise ValueError("indefinite length")

    try:
        major, entries, pos = head(0)
        if major != 5:
            return None
        steps = 0
        for _ in range(entries):
            major, n, pos = head(pos)
            if major != 3:
                return None
            name = data[pos:pos + n]
            pos += n
            if name == want:
                major, n, pos = head(pos)
                if major != 3 or pos + n > end:
                    return None
                return data[pos:pos + n].decode("utf-8")
            pending = 1   # skip one value, whatever it holds
            while pending:
                steps += 1
                if steps > max_items or pos >= end:
                    return None
                major, n, pos = head(pos)
                pending -= 1
                if major in (2, 3):
                    pos += n
                elif major == 4:
                    pending += n
                elif major == 5:
                    pending += 2 * n
                elif major == 6:
                    pending += 1
    except (ValueError, IndexError, UnicodeDecodeError):
        return None
    return None


def decode_if_canonical(data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[object, bool]:
    """(value, True) when `data` is exactly one item in canonical DAG-CBOR, else (None, False).

    The fast path alone: it never explains a refusal (use `decode` for that) and does not check
    the size. Byte equality with our canonical encoding is the proof of validity.
    """
    out: list[bytes] = []
    try:
        value = _loads(data, max_depth=max_depth, tag_hook=_tag_hook)
        _encode_into(value, out, 0)
    except Exception:
        return None, False
    if b"".join(out) == data:
        return value, True
    return None, False


def decode_canonical(
    data: bytes, *, max_size: int = DEFAULT_MAX_SIZE, max_depth: int = DEFAULT_MAX_DEPTH,
    max_items: int | None = DEFAULT_MAX_ITEMS,
) -> tuple[object, bool]:
    """(value, was_canonical): like `decode`, also telling whether `data` is exactly the
    canonical encoding of the value (so callers can reuse the bytes instead of re-encoding).
    `max_items=None`: no bound on items (a client reading a server's answers)."""
    data = _as_bytes(data)
    if len(data) > max_size:
        raise DagCborError(413, f"input is {len(data)} bytes; the limit is {max_size} bytes")
    if max_items is not None:
        check_items(data, max_items)
    value, canonical = decode_if_canonical(data, max_depth=max_depth)
    if canonical:
        return value, True
    if len(data) > STRICT_MAX_SIZE:
        raise DagCborError(400, f"input of {len(data)} bytes is not canonical DAG-CBOR; input over "
                                f"{STRICT_MAX_SIZE} bytes must be canonical (sorted keys, shortest "
                                "integers, 64-bit floats)")
    # Any cbor2 complaint or encoder refusal: the strict reader decides and explains.
    return strict_decode(data, max_depth), False


def encode_head(major: int, n: int) -> bytes:
    """The shortest head of a CBOR item (major type, length or value): for callers that splice
    already-encoded items into an array or map of their own."""
    return _head(major, n)


def shortest_head_at(data: bytes, pos: int, major: int) -> tuple[int, int] | None:
    """`encode_head` read back: (value or length, offset after the head) of the head at `pos`
    when it is of type `major` in its shortest form, else None (another type, indefinite or
    reserved, too long a form for its value, or cut short). For callers reading spliced frames
    from their bytes."""
    if pos >= len(data):
        return None
    first = data[pos]
    if first >> 5 != major:
        return None
    info = first & 0x1F
    if info < 24:
        return info, pos + 1
    if info > 27:
        return None
    width = 1 << (info - 24)
    end = pos + 1 + width
    if end > len(data):
        return None
    n = int.from_bytes(data[pos + 1:end], "big")
    if n < (24 if width == 1 else 1 << (4 * width)):   # a longer form than the value needs
        return None
    return n, end


def decode_unchecked(data: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> object:
    """cbor2's C decoder alone, for a caller that proves canonicity itself by encoding the value
    (or its parts) again and comparing with `data` (clients/wire.py keeps each event's bytes that
    way). Raises whatever cbor2 raises on malformed input."""
    return _loads(data, max_depth=max_depth, tag_hook=_tag_hook)


def _cid(raw: bytes) -> object:   # cbrrr hands over a tag 42's binary CID, without its 0x00
    return cid_from_link_bytes(b"\x00" + raw)


def decode_trusted(data: bytes) -> object:
    """Decode bytes this program encoded itself (stored rows), with no canonical check of our
    own. Never for anything that came from outside. cbrrr's C decoder (strict DAG-CBOR, ~1.6x
    cbor2's on a stored event: docs/performance.md, "v1 replay"); what it refuses (bytes stored
    in a form it does not take as canonical) is read by cbor2's, as before."""
    try:
        return _cbrrr_decode(data, cid_ctor=_cid)
    except Exception:  # noqa: BLE001 - cbrrr's refusal: cbor2 reads it, or raises its own error
        return _loads(data, tag_hook=_tag_hook)


def _canonical_cid(raw: bytes) -> object:
    # cbrrr checks only tag 42's leading zero byte: the CID itself must parse, and (as the
    # canonical proof by encoding again demands) be written as its own binary form.
    cid = cid_from_link_bytes(b"\x00" + raw)
    if bytes(cid) != raw:
        raise DagCborError(400, "a CID is not in its canonical binary form")
    return cid


def decode_strict_at(data: bytes | memoryview, pos: int = 0) -> tuple[object, int]:
    """One item of canonical DAG-CBOR starting at `pos` of `data`, and the offset where it ends
    (bytes after it are the caller's: a frame's next item). cbrrr's C decoder, which refuses
    everything canonical DAG-CBOR forbids: integers, lengths and counts in longer heads than
    needed, map keys that are not text or not in canonical order (duplicates too), floats other
    than 64-bit ones, NaN and infinities, simple values but false/true/null, tags but 42 around a
    binary CID, indefinite lengths, invalid UTF-8, and input that ends inside the item. So what it
    accepts is exactly the canonical encoding of the value it returns (tests/protocol/
    test_protocol_dagcbor_strict_at.py holds it to `encode`), with no encoding again to prove
    it. It walks nesting on a stack of its own, not the C stack, so depth alone cannot crash it.
    Raises ValueError (cbrrr's, or a DagCborError for a CID) without explaining: for a reason,
    decode the input with `decode`."""
    if pos:
        data = (data if type(data) is memoryview else memoryview(data))[pos:]
    value, length = _cbrrr_item(data, _canonical_cid, False)  # type: ignore[arg-type]  # any buffer
    return value, pos + length


def decode_strict_run(data: bytes, pos: int, count: int) -> tuple[list, list[bytes], int]:
    """`count` items of canonical DAG-CBOR one after another from `pos` of `data` (a replay
    frame's events), each as `decode_strict_at` reads it: their values, each one's bytes, and
    the offset after the last."""
    view = memoryview(data)
    values: list = []
    parts: list[bytes] = []
    add_value, add_part = values.append, parts.append
    for _ in range(count):
        value, length = _cbrrr_item(view[pos:], _canonical_cid, False)  # type: ignore[arg-type]  # any buffer
        add_value(value)
        end = pos + length
        add_part(data[pos:end])
        pos = end
    return values, parts, pos


def decode_trusted_many_loose(count: int, data: bytes) -> list | None:
    """`count` items this program encoded itself (stored rows), one after the other, decoded in
    one call by libipld's Rust decoder (~0.6x cbrrr's time on a page of stored events:
    docs/performance.md "cold"), with one difference from `decode_trusted`: a CID comes back
    as its bytes, as a byte string would. So a caller may use the values only where none of
    them is bytes (a v1 replay page whose JSON needs no `default`), and reads the page again
    with `decode_trusted` otherwise. None when libipld refuses the bytes (or they are not
    `count` items): then `decode_trusted` reads them too."""
    try:
        items = _libipld_many(data)
    except Exception:  # noqa: BLE001 - libipld's refusal (ValueError), whatever its kind
        return None
    return items if len(items) == count else None


def decode(
    data: bytes, *, max_size: int = DEFAULT_MAX_SIZE, max_depth: int = DEFAULT_MAX_DEPTH,
    max_items: int | None = DEFAULT_MAX_ITEMS,
) -> object:
    """Decode one strict DAG-CBOR item; DagCborError (400, or 413 over `max_size`; 400 over
    `max_items`) otherwise."""
    return decode_canonical(data, max_size=max_size, max_depth=max_depth, max_items=max_items)[0]

"""CAR (Content Addressable aRchive) version 1, the IPLD archive format: a varint-prefixed
DAG-CBOR header `{version: 1, roots: [CID]}`, then sections of varint(length) + CID + block.

Small enough to write directly (https://ipld.io/specs/transport/car/carv1/); no maintained
Python library reads and writes it without pulling in a whole IPFS stack. Only what session
exports need: CIDv1 with sha2-256 over DAG-CBOR (0x71) or raw (0x55) blocks, every block's hash
checked on the way in.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator

from multiformats import CID

from .cids import cid_text
from .dagcbor import decode, encode
from .errors import ProtocolError

_SHA2_256 = 0x12
_CODECS = (0x71, 0x55)   # dag-cbor, raw
MAX_HEADER = 1 << 16
MAX_BLOCK = 8 << 20


class CarError(ValueError):
    """A CAR file that is not well formed, or a block whose bytes do not hash to its CID."""


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data):
            raise CarError("the file ends inside a length")
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise CarError("a length is too long")


def header(roots: list[bytes]) -> bytes:
    """The header bytes for binary CIDs `roots`."""
    body = encode({"version": 1, "roots": [CID.decode(r) for r in roots]})
    return varint(len(body)) + body


def section(cid: bytes, block: bytes) -> bytes:
    return varint(len(cid) + len(block)) + cid + block


def read(data: bytes) -> tuple[list[bytes], Iterator[tuple[bytes, bytes]]]:
    """(roots, blocks): the header's roots as binary CIDs, and each (CID, block) in file order,
    its hash checked as it is read."""
    view = memoryview(data)
    size, pos = _read_varint(view, 0)
    if size > MAX_HEADER or pos + size > len(view):
        raise CarError("the header is cut short or too large")
    try:
        head = decode(bytes(view[pos:pos + size]))
    except ProtocolError as exc:
        raise CarError(f"the header is not DAG-CBOR: {exc.message}") from exc
    if not isinstance(head, dict) or head.get("version") != 1 or not isinstance(head.get("roots"), list):
        raise CarError("not a CAR version 1 header")
    roots = [bytes(r) for r in head["roots"] if isinstance(r, CID)]
    if len(roots) != len(head["roots"]):
        raise CarError("a root is not a CID")
    return roots, _blocks(view, pos + size)


def _blocks(view: memoryview, pos: int) -> Iterator[tuple[bytes, bytes]]:
    while pos < len(view):
        size, pos = _read_varint(view, pos)
        if size > MAX_BLOCK or pos + size > len(view):
            raise CarError("a block is cut short or too large")
        # CIDv1 prefix: version, codec, hash code, digest length, each one byte here.
        if size < 4 or view[pos] != 1 or view[pos + 1] not in _CODECS or view[pos + 2] != _SHA2_256 or view[pos + 3] != 32:
            raise CarError("a block's CID is not a CIDv1 with sha2-256 over dag-cbor or raw bytes")
        cid = bytes(view[pos:pos + 36])
        block = bytes(view[pos + 36:pos + size])
        if hashlib.sha256(block).digest() != cid[4:]:
            raise CarError(f"a block does not hash to its CID {cid_text(cid)}")
        yield cid, block
        pos += size



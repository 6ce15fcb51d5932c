"""CIDs of DAG-CBOR blocks as this protocol makes them: CIDv1, codec dag-cbor (0x71), multihash
sha2-256, written as multibase base32 ('bafy...'). One place for capabilities, session chains
and their CAR exports.

The binary form is fixed bytes then the digest (every varint here is one byte), and the text is
RFC 4648 base32, lower case, unpadded, after the prefix "b": the standard library's C encoder
writes it in microseconds, where multiformats' own took some 8 ms (a turn's start computes a few
of these, on the event loop).
"""
from __future__ import annotations

import hashlib

PREFIX = b"\x01\x71\x12\x20"   # CIDv1, dag-cbor, sha2-256, a 32-byte digest


# A fresh hash object by copying this one: `hashlib.sha256()` looks the digest up by name in
# OpenSSL 3 at every call, which costs more than hashing a block of an append (and a turn makes
# several: bench/history.py, docs/performance.md).
_SHA256 = hashlib.sha256()
# Base32 text ten bits (two characters) at a time, from an integer: the standard library's
# b32encode is Python bytecode, a loop over five-byte groups, and a turn makes a CID text.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]


def sha256(data: bytes) -> bytes:
    h = _SHA256.copy()
    h.update(data)
    return h.digest()


def cid_bytes(data: bytes) -> bytes:
    """The binary CID of a block's bytes."""
    return PREFIX + sha256(data)


def cid_text(cid: bytes) -> str:
    """A binary CID as its multibase base32 text."""
    return "b" + base32(cid)


# Up to 40 bytes (a CID is 36), base32 without a Python loop: the data's 5-bit groups are spread
# one to a byte by six mask-and-shift steps on one integer (the upper half of every block of 2b
# groups moves up 3b bits, b = 32, 16, ... 1), then the bytes are mapped to the alphabet. About
# half the time of ten bits at a time (`_base32_pairs`), which longer inputs still take.
_LANES = 64
_TO_ALPHABET = bytes(ord(_ALPHABET[i % 32]) for i in range(256))


def _spread_steps() -> list[tuple[int, int, int]]:
    steps = []
    b = _LANES // 2
    while b >= 1:
        low = sum(((1 << (5 * b)) - 1) << (k * 16 * b) for k in range(_LANES // (2 * b)))
        steps.append((low, low << (5 * b), 3 * b))
        b //= 2
    return steps


_SPREAD = _spread_steps()


def base32(data: bytes) -> str:
    """RFC 4648 base32 of `data`, lower case, unpadded (as base64.b32encode, then lowered and
    stripped of '=')."""
    bits = 8 * len(data)
    chars = -(-bits // 5)
    if chars > _LANES:
        return _base32_pairs(data)
    n = int.from_bytes(data, "big") << (5 * chars - bits)   # zero bits fill the last group
    for low, high, shift in _SPREAD:
        n = (n & low) | ((n & high) << shift)
    return n.to_bytes(_LANES, "big")[_LANES - chars:].translate(_TO_ALPHABET).decode("ascii")


def _base32_pairs(data: bytes) -> str:
    """base32 ten bits (two characters) at a time, for inputs longer than `_LANES` characters."""
    bits = 8 * len(data)
    chars = -(-bits // 5)
    pairs = -(-chars // 2)
    n = int.from_bytes(data, "big") << (10 * pairs - bits)   # zero bits fill the last group
    text = "".join([_PAIRS[(n >> shift) & 1023] for shift in range(10 * pairs - 10, -1, -10)])
    return text[:chars]

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


def base32(data: bytes) -> str:
    """RFC 4648 base32 of `data`, lower case, unpadded (as base64.b32encode, then lowered and
    stripped of '=')."""
    bits = 8 * len(data)
    chars = -(-bits // 5)
    pairs = -(-chars // 2)
    n = int.from_bytes(data, "big") << (10 * pairs - bits)   # zero bits fill the last group
    text = "".join([_PAIRS[(n >> shift) & 1023] for shift in range(10 * pairs - 10, -1, -10)])
    return text[:chars]

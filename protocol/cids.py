"""CIDs of DAG-CBOR blocks as this protocol makes them: CIDv1, codec dag-cbor (0x71), multihash
sha2-256, written as multibase base32 ('bafy...'). One place for capabilities, session chains
and their CAR exports.

The binary form is fixed bytes then the digest (every varint here is one byte), and the text is
RFC 4648 base32, lower case, unpadded, after the prefix "b": the standard library's C encoder
writes it in microseconds, where multiformats' own took some 8 ms (a turn's start computes a few
of these, on the event loop).
"""
from __future__ import annotations

import base64
import hashlib

PREFIX = b"\x01\x71\x12\x20"   # CIDv1, dag-cbor, sha2-256, a 32-byte digest


def cid_bytes(data: bytes) -> bytes:
    """The binary CID of a block's bytes."""
    return PREFIX + hashlib.sha256(data).digest()


def cid_text(cid: bytes) -> str:
    """A binary CID as its multibase base32 text."""
    return "b" + base64.b32encode(cid).decode("ascii").lower().rstrip("=")

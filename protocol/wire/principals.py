"""Principals: who signs and whom an action is for.

Bytes: `0xED 0x01` (multicodec ed25519-pub as a varint) followed by the 32-byte Ed25519 public
key, 34 bytes in all. String (account and signer ids): multibase base58btc of those bytes,
`z` + base58btc, which always starts with `z6Mk`.
"""

from __future__ import annotations

from functools import lru_cache

from multiformats import multibase

from .errors import ProtocolError, quote

PRINCIPAL_PREFIX = b"\xed\x01"
PRINCIPAL_LENGTH = 34
PUBLIC_KEY_LENGTH = 32

_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def principal_from_public_key(pk: bytes) -> bytes:
    if type(pk) is not bytes or len(pk) != PUBLIC_KEY_LENGTH:
        raise ProtocolError(400, f"an Ed25519 public key is {PUBLIC_KEY_LENGTH} bytes")
    return PRINCIPAL_PREFIX + pk


def check_principal(b: object, field: str = "principal") -> bytes:
    """`b` if it is a valid principal, else ProtocolError(400) naming what is wrong."""
    if type(b) is not bytes:
        raise ProtocolError(400, f"{field} must be a byte string (0xed01 + 32-byte Ed25519 key), "
                                 f"got {type(b).__name__}")
    if len(b) != PRINCIPAL_LENGTH:
        raise ProtocolError(400, f"{field} has the wrong length: expected {PRINCIPAL_LENGTH} "
                                 f"bytes (0xed01 + 32-byte Ed25519 key), got {len(b)}")
    if b[:2] != PRINCIPAL_PREFIX:
        raise ProtocolError(400, f"{field} has the wrong multicodec prefix: expected 0xed01 "
                                 f"(Ed25519 public key), got 0x{b[:2].hex()}")
    return b


def public_key_of(principal: bytes) -> bytes:
    return check_principal(principal)[2:]


def _base58btc(raw: bytes) -> str:
    # multiformats' encoder costs ~300 us per call; this one a few us, and the server makes an
    # id for every principal it has not seen (tests check both agree).
    n = int.from_bytes(raw, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(_B58_ALPHABET[r])
    zeros = len(raw) - len(raw.lstrip(b"\x00"))
    return "1" * zeros + "".join(reversed(out))


def principal_to_string(b: bytes) -> str:
    """`z` + base58btc of a valid principal; ProtocolError(400) for anything else."""
    return _principal_to_string(check_principal(b))


@lru_cache(maxsize=8192)  # the server turns the same few principals into ids on every request
def _principal_to_string(b: bytes) -> str:
    return "z" + _base58btc(b)


def principal_from_string(s: str) -> bytes:
    """Parse `z6Mk...`; ProtocolError(400) saying whether the encoding, the length or the
    multicodec prefix is wrong."""
    if type(s) is not str:
        raise ProtocolError(400, f"invalid principal encoding: expected a string, got "
                                 f"{type(s).__name__}")
    return _principal_from_string(s)


@lru_cache(maxsize=8192)  # ids in subscription keys and requests repeat; decoding is ~80 us
def _principal_from_string(s: str) -> bytes:
    if not s.startswith("z"):
        raise ProtocolError(400, f"invalid principal encoding: {quote(s)} is not multibase "
                                 "base58btc (it must start with 'z')")
    try:
        raw = multibase.decode(s)
    except Exception as e:  # multiformats/bases raise several types; all mean a bad character
        raise ProtocolError(400, f"invalid principal encoding: {quote(s)} is not valid "
                                 f"base58btc ({str(e)[:120]})") from None
    if len(raw) != PRINCIPAL_LENGTH:
        raise ProtocolError(400, f"invalid principal length: expected {PRINCIPAL_LENGTH} bytes, "
                                 f"got {len(raw)}")
    if raw[:2] != PRINCIPAL_PREFIX:
        raise ProtocolError(400, "invalid principal multicodec: expected Ed25519 public key "
                                 f"(0xed01), got 0x{raw[:2].hex()}")
    return raw

"""Canonical DAG-CBOR writer (internal; use `seed_agents.protocol.wire.dagcbor.encode`).

This sits on the hot path of every request (the canonical check and the signing input), so it is
written for speed: exact-type dispatch (`type(v) is ...`, so subclasses such as IntEnum or
datetime are refused rather than guessed at), a table of one- and two-byte heads, and bounded
caches of encoded short strings and of the canonical order of a map's key set.
"""

from __future__ import annotations

import math
import struct

from multiformats import CID

from .errors import DagCborError, quote

# Values the server encodes are decoded frames (at most 64 deep) wrapped in a few levels of
# response; this bound only stops runaway or cyclic structures before Python's recursion limit.
ENCODE_MAX_DEPTH = 256

_UINT_MAX = (1 << 64) - 1

# _HEAD[major][n] for n < 256: the complete head of that major type (1 or 2 bytes).
_HEAD = tuple(
    tuple(bytes((major << 5 | n,)) if n < 24 else bytes((major << 5 | 24, n)) for n in range(256))
    for major in range(8)
)
_pack_u16 = struct.Struct(">BH").pack
_pack_u32 = struct.Struct(">BI").pack
_pack_u64 = struct.Struct(">BQ").pack
_pack_f64 = struct.Struct(">Bd").pack
_H0, _H1, _H2, _H4, _H5 = _HEAD[0], _HEAD[1], _HEAD[2], _HEAD[4], _HEAD[5]

_CACHE_LIMIT = 4096  # entries per cache; cleared when full (cheaper than LRU bookkeeping)
_STR_CACHE_MAX_LEN = 64  # only short strings (keys, type names, ids) are worth caching
_ORDER_CACHE_MAX_KEYS = 32
_ORDER_CACHE_MAX_CHARS = 512  # all keys of a cached key set together: an entry stays ~2 KB, the cache ~8 MB
_str_cache: dict[str, bytes] = {}
_order_cache: dict[tuple, tuple] = {}

_FALSE, _TRUE, _NULL = b"\xf4", b"\xf5", b"\xf6"
_CID_TAG = b"\xd8\x2a"


def _head(major: int, n: int) -> bytes:
    if n < 256:
        return _HEAD[major][n]
    mt = major << 5
    if n < 0x10000:
        return _pack_u16(mt | 25, n)
    if n < 0x100000000:
        return _pack_u32(mt | 26, n)
    return _pack_u64(mt | 27, n)


def _encode_str(s: str) -> bytes:
    b = _str_cache.get(s)
    if b is not None:
        return b
    try:
        raw = s.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates have no UTF-8 form; DAG-CBOR text must be valid UTF-8.
        raise DagCborError(400, "text contains a lone surrogate and is not valid UTF-8") from None
    n = len(raw)
    b = (_HEAD[3][n] if n < 256 else _head(3, n)) + raw
    if len(s) <= _STR_CACHE_MAX_LEN:
        if len(_str_cache) >= _CACHE_LIMIT:
            _str_cache.clear()
        _str_cache[s] = b
    return b


def _key_order(keys: tuple) -> tuple:
    """(key, encoded key) pairs in DAG-CBOR order: encoded length first, then bytewise."""
    order = _order_cache.get(keys)
    if order is not None:
        return order
    for k in keys:
        if type(k) is not str:
            raise DagCborError(400, f"map key {quote(k)} is not a string; DAG-CBOR map keys are text")
    # UTF-8 preserves code point order, so (byte length, str) sorts like (byte length, bytes).
    pairs = sorted(((k, _encode_str(k)) for k in keys), key=lambda p: (len(p[1]), p[0]))
    order = tuple(pairs)
    # Only small key sets (the shapes of real messages) are remembered, so the cache stays small
    # whatever maps a client sends.
    # Every key counts: a client's map of long keys would otherwise pin megabytes per entry.
    if len(keys) <= _ORDER_CACHE_MAX_KEYS and sum(len(k) for k in keys) <= _ORDER_CACHE_MAX_CHARS:
        if len(_order_cache) >= _CACHE_LIMIT:
            _order_cache.clear()
        _order_cache[keys] = order
    return order


def _encode_int(v: int) -> bytes:
    if v >= 0:
        if v < 256:
            return _H0[v]
        if v < 0x10000:
            return _pack_u16(0x19, v)
        if v < 0x100000000:
            return _pack_u32(0x1A, v)
        if v <= _UINT_MAX:
            return _pack_u64(0x1B, v)
        raise DagCborError(400, f"integer {v} is above 2^64-1, the largest DAG-CBOR integer")
    n = -1 - v
    if n < 256:
        return _H1[n]
    if n < 0x10000:
        return _pack_u16(0x39, n)
    if n < 0x100000000:
        return _pack_u32(0x3A, n)
    if n <= _UINT_MAX:
        return _pack_u64(0x3B, n)
    raise DagCborError(400, f"integer {v} is below -2^64, the smallest DAG-CBOR integer")


def _encode_float(v: float) -> bytes:
    if not math.isfinite(v):
        raise DagCborError(400, f"float {v!r} cannot be encoded: DAG-CBOR has no NaN or infinity")
    return _pack_f64(0xFB, v)


def _encode_cid(v: CID) -> bytes:
    raw = b"\x00" + bytes(v)  # tag 42 content: the identity multibase prefix, then the binary CID
    return _CID_TAG + _head(2, len(raw)) + raw


def _encode_into(v, out, depth, _str_get=_str_cache.get, _order_get=_order_cache.get):
    # Containers first: they carry most of the work. `out.append` on the list itself (not a
    # bound method passed around) is specialised by CPython. Cached string encodings are never
    # empty, so `_str_get(x) or _encode_str(x)` is a cheap cache-or-compute.
    t = type(v)
    if t is dict:
        if depth >= ENCODE_MAX_DEPTH:
            raise DagCborError(400, f"value is nested deeper than {ENCODE_MAX_DEPTH} levels")
        n = len(v)
        out.append(_H5[n] if n < 256 else _head(5, n))
        keys = tuple(v)
        depth += 1
        for k, ek in _order_get(keys) or _key_order(keys):
            out.append(ek)
            x = v[k]
            tx = type(x)
            # Inline the common leaves: a call per leaf is a large share of the cost.
            if tx is str:
                out.append(_str_get(x) or _encode_str(x))
            elif tx is bytes:
                m = len(x)
                out.append(_H2[m] if m < 256 else _head(2, m))
                out.append(x)
            elif tx is int:
                out.append(_H0[x] if 0 <= x < 256 else _encode_int(x))
            else:
                _encode_into(x, out, depth)
    elif t is list or t is tuple:
        if depth >= ENCODE_MAX_DEPTH:
            raise DagCborError(400, f"value is nested deeper than {ENCODE_MAX_DEPTH} levels")
        n = len(v)
        out.append(_H4[n] if n < 256 else _head(4, n))
        depth += 1
        for x in v:
            tx = type(x)
            if tx is str:
                out.append(_str_get(x) or _encode_str(x))
            elif tx is int:
                out.append(_H0[x] if 0 <= x < 256 else _encode_int(x))
            else:
                _encode_into(x, out, depth)
    elif t is str:
        out.append(_str_get(v) or _encode_str(v))
    elif t is int:
        out.append(_encode_int(v))
    elif t is bytes:
        n = len(v)
        out.append(_H2[n] if n < 256 else _head(2, n))
        out.append(v)
    elif v is None:
        out.append(_NULL)
    elif v is True:
        out.append(_TRUE)
    elif v is False:
        out.append(_FALSE)
    elif t is float:
        out.append(_encode_float(v))
    elif t is CID:
        out.append(_encode_cid(v))
    elif t is bytearray or t is memoryview:
        raw = bytes(v)
        out.append(_head(2, len(raw)))
        out.append(raw)
    else:
        raise DagCborError(400, f"a value of type {t.__name__} cannot be encoded as DAG-CBOR")


def encode(value: object) -> bytes:
    """The canonical DAG-CBOR bytes of `value`; DagCborError(400) for anything not encodable."""
    out: list[bytes] = []
    _encode_into(value, out, 0)
    return b"".join(out)

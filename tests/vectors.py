"""Loader for the reference vectors in tests/vectors/ (see its README.md): a copy kept in the
repository so it stands alone; tests/protocol/test_vectors_copy.py checks it against the original."""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

from multiformats import CID

VECTORS_DIR = Path(__file__).resolve().parent / "vectors"


class _Undefined:
    """Stands for CBOR/JS `undefined`, which has no Python value (vectors: {"$undefined": true})."""

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED = _Undefined()


@cache
def _load(name: str) -> str:
    return (VECTORS_DIR / f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> dict:
    """The parsed `<name>.json` (a fresh copy each call, so tests may mutate it)."""
    return json.loads(_load(name))


def from_tagged(obj: object) -> object:
    """Tagged JSON to Python values: {"$bytes": hex}, {"$float": n}, {"$cid": text} and
    {"$undefined": true} (UNDEFINED)."""
    if isinstance(obj, dict):
        if len(obj) == 1:
            (tag, value), = obj.items()
            if tag == "$bytes":
                return bytes.fromhex(value)
            if tag == "$float":
                return float(value)
            if tag == "$cid":
                return CID.decode(value)
            if tag == "$undefined":
                return UNDEFINED
        return {k: from_tagged(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_tagged(v) for v in obj]
    return obj


def same(a: object, b: object) -> bool:
    """Equality as the vectors mean it: it also tells 2 from 2.0, -0.0 from 0.0 and True from 1
    (floats compared bit for bit)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack(">d", a) == struct.pack(">d", b)
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b

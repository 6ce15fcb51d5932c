"""Loader for the Seed hypermedia vectors in tests/hm_vectors/ (written by make_vectors.mjs with
@seed-hypermedia/client; regenerate with `cd tests/hm_vectors && npm ci && node make_vectors.mjs`).

The library draws block ids from Math.random, which the script replaces with mulberry32;
`block_ids(seed)` draws the same ids here.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from pathlib import Path
from typing import Callable

from seed_agents.protocol.hm.hm_markdown import ID_CHARS

HM_VECTORS_DIR = Path(__file__).resolve().parent / "hm_vectors"


@cache
def load(name: str) -> dict:
    return json.loads((HM_VECTORS_DIR / f"{name}.json").read_text(encoding="utf-8"))


def mulberry32(seed: int) -> Callable[[], float]:
    """The same PRNG as make_vectors.mjs (Math.imul arithmetic on 32-bit words)."""
    state = seed & 0xFFFFFFFF

    def imul(a: int, b: int) -> int:
        return (a * b) & 0xFFFFFFFF

    def rand() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = state
        t = imul(t ^ (t >> 15), t | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return rand


def block_ids(seed: int) -> Callable[[], str]:
    """The library's generateBlockId under the script's seeded Math.random."""
    rand = mulberry32(seed)

    def new_id() -> str:
        return "".join(ID_CHARS[int(rand() * len(ID_CHARS))] for _ in range(8))

    return new_id


def blob_bytes(entry: dict) -> bytes:
    return base64.b64decode(entry["data"])


def pattern_bytes(size: int, mul: int) -> bytes:
    """make_vectors.mjs's patternBytes: the UnixFS vectors' file contents (periodic every 65536
    bytes, so built from one period)."""
    period = bytes(((i * mul + (i >> 8)) & 0xFF) for i in range(min(size, 65536)))
    whole, rest = divmod(size, 65536) if size > 65536 else (1, 0)
    return (period * whole + period[:rest])[:size]

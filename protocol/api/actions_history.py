"""Verifiable history: GetSessionHead and GetSessionChain (docs/protocol.md, "Verifiable history").

Ours, not the reference's: the reference protocol has no signed history. Each action: its
frozen dataclass, its parser and one line in `ACTIONS`, which protocol/api/actions.py merges.
"""
from __future__ import annotations

from dataclasses import dataclass

from .fields import MAX_ID, ActionKind, Fields, read

MAX_CHAIN_LIMIT = 10_000


@dataclass(frozen=True)
class GetSessionHead:
    ts: int
    session_id: str


@dataclass(frozen=True)
class GetSessionChain:
    ts: int
    session_id: str
    after_seq: int = 0
    limit: int | None = None


def _chain(f: Fields, ts: int) -> GetSessionChain:
    return GetSessionChain(ts, f.text("sessionId", MAX_ID), f.integer("afterSeq", 0, None) or 0,
                           f.integer("limit", 1, MAX_CHAIN_LIMIT))


ACTIONS: dict[str, ActionKind] = {
    "GetSessionHead": read(lambda f, ts: GetSessionHead(ts, f.text("sessionId", MAX_ID))),
    "GetSessionChain": read(_chain),
}

"""`Event`: what a trigger source hands to admission (server/triggers/firing.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Event:
    """What a source hands to admission."""

    key: str                       # the firing's stable key
    summary: str                   # one line, for the session title and the firing list
    activity: dict                 # the event itself (untrusted when it came from outside)
    scheduled_at: int | None = None
    body_digest: bytes | None = None
    chain_depth: int = 0
    skip: str | None = None        # recorded as skipped, with this reason, instead of firing

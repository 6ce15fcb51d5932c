"""Fan-out of live events, indexed by subscription key.

Publishing costs work proportional to the subscribers of that key only; every subscriber's
`deliver` is synchronous and non-blocking (it queues bytes or drops), so one slow socket
never holds up the others.
"""
from __future__ import annotations

from typing import Protocol

from server.frames import Outgoing


class Subscriber(Protocol):
    def deliver(self, event: Outgoing) -> None: ...


class Hub:
    def __init__(self) -> None:
        self._by_key: dict[str, set[Subscriber]] = {}
        self.published = 0

    def add(self, key: str, sub: Subscriber) -> None:
        self._by_key.setdefault(key, set()).add(sub)

    def remove(self, key: str, sub: Subscriber) -> None:
        subs = self._by_key.get(key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_key[key]

    def drop(self, key: str) -> None:
        """Forget every subscriber of `key` (what it names was deleted): nothing published on
        it later reaches anyone."""
        self._by_key.pop(key, None)

    def subscriber_count(self, key: str | None = None) -> int:
        if key is not None:
            return len(self._by_key.get(key, ()))
        return sum(len(s) for s in self._by_key.values())

    def publish(self, event: Outgoing) -> int:
        subs = self._by_key.get(event.key)
        if not subs:
            return 0
        self.published += 1
        for sub in tuple(subs):  # a delivery may unsubscribe (slow consumer cut-off)
            sub.deliver(event)
        return len(subs)

"""Fan-out of live events, indexed by subscription key.

Publishing costs work proportional to the subscribers of the event's keys only (an event can be
routed to several keys: CONTRACT section 5); every subscriber's
`deliver` is synchronous and non-blocking (it queues bytes or drops), so one slow socket
never holds up the others.
"""
from __future__ import annotations

from typing import Protocol

from .frames import Outgoing


class Subscriber(Protocol):
    def deliver(self, event: Outgoing) -> None: ...

    def follows(self, key: str) -> bool:
        """Does this subscriber's socket also follow `key` (with another subscription)?"""
        ...


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

    def has_subscribers(self, key: str) -> bool:
        return key in self._by_key   # a key's set is removed with its last subscriber

    def drop(self, key: str) -> None:
        """Forget every subscriber of `key` (what it names was deleted): nothing published on
        it later reaches anyone."""
        self._by_key.pop(key, None)

    def publish_to(self, keys, event: Outgoing) -> int:
        """Deliver one event (encoded at most once per framing, shared by all) to the
        subscribers of `keys`, most specific first (the event's own key, then the broader keys
        it is routed to). A socket receives the event once, through the first of its
        subscriptions that covers it: one following the event's own key keeps its replay and
        seq order, and a socket following a session and its account gets no duplicate.
        Returns the deliveries."""
        delivered = 0
        by_key = self._by_key
        for i, key in enumerate(keys):
            subs = by_key.get(key)
            if not subs:
                continue
            earlier = keys[:i]
            for sub in tuple(subs):  # a delivery may unsubscribe (slow consumer cut-off)
                if earlier and any(sub.follows(k) for k in earlier):
                    continue
                sub.deliver(event)
                delivered += 1
        if delivered:
            self.published += 1
        return delivered

"""Fan-out of live events, indexed by subscription key.

Publishing costs work proportional to the subscribers of the event's keys only (an event can be
routed to several keys: CONTRACT section 5); every subscriber's
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

    def subscriber_count(self, key: str | None = None) -> int:
        if key is not None:
            return len(self._by_key.get(key, ()))
        return sum(len(s) for s in self._by_key.values())

    def publish(self, event: Outgoing) -> int:
        """Deliver to the subscribers of the event's own key."""
        return self.publish_to((event.key,), event)

    def publish_to(self, keys, event: Outgoing) -> int:
        """Deliver one event (encoded at most once per framing, shared by all) to the
        subscribers of each of `keys`; the keys of one event are distinct, and a subscription
        follows one key, so no subscription receives it twice. Returns the deliveries."""
        delivered = 0
        by_key = self._by_key
        for key in keys:
            subs = by_key.get(key)
            if subs:
                delivered += len(subs)
                for sub in tuple(subs):  # a delivery may unsubscribe (slow consumer cut-off)
                    sub.deliver(event)
        if delivered:
            self.published += 1
        return delivered

"""A clock the test moves: what a server's token buckets read when it is given as
`Config.rate_clock` (server/ratelimit.py), so what a burst gets and what a refill gives back are
exact, however slowly a loaded machine sends the burst."""
from __future__ import annotations


class StoppedClock:
    """Monotonic seconds that stand still until `advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

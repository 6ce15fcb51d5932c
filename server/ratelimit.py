"""Token buckets: one per account (CONTRACT section 6: 100 actions/s with bursts of 200 by
default), charged only by that account's verified actions, and one per connection, charged by
every frame it sends (server/verification/dispatch.py). The clock is an argument (`time.monotonic` unless a
test gives its own), so a refill is tested without waiting for it."""
from __future__ import annotations

import time
from typing import Callable

Clock = Callable[[], float]   # seconds, monotonic


def scaled_clock(speed: float) -> Clock:
    """`time.monotonic` at `speed` times its pace (tests only: `--rate-clock-speed`, for a server
    in a child process, whose clock a test cannot move); itself at 1."""
    if speed == 1:
        return time.monotonic
    start = time.monotonic()
    return lambda: start + (time.monotonic() - start) * speed


class TokenBucket:
    __slots__ = ("rate", "burst", "tokens", "stamp", "clock")

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        self.rate, self.burst = rate, float(burst)
        self.clock = clock
        self.tokens, self.stamp = float(burst), clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def ready(self) -> bool:
        """Is a token there? (A look: nothing is taken.)"""
        self._refill()
        return self.tokens >= 1.0

    def take(self, cost: float = 1.0) -> bool:
        """Take `cost` tokens when that many are there (a request that costs more takes more)."""
        self._refill()
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False


class RateLimiter:
    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def _bucket(self, account_id: str) -> TokenBucket:
        bucket = self._buckets.get(account_id)
        if bucket is None:
            if len(self._buckets) > 100_000:  # forget idle accounts rather than grow forever
                self._buckets.clear()
            bucket = self._buckets[account_id] = TokenBucket(self.rate, self.burst, self.clock)
        return bucket

    def ready(self, account_id: str) -> bool:
        """Has the account a token left? A look only: never charges (an unverified frame that
        merely names the account must not cost it anything)."""
        bucket = self._buckets.get(account_id)
        return bucket is None or bucket.ready()

    def take(self, account_id: str) -> bool:
        """Charge one of the account's own verified actions."""
        return self._bucket(account_id).take()

    def refund(self, account_id: str) -> None:
        """Give back the token `take` charged for an action then refused as a replay (a claim
        made in the handler's own statements: server/store/handed_claim.py)."""
        bucket = self._buckets.get(account_id)
        if bucket is not None:
            bucket.tokens = min(bucket.burst, bucket.tokens + 1.0)

"""Per-account token buckets (CONTRACT section 6: 100 actions/s with bursts of 200 by default)."""
from __future__ import annotations

import time


class TokenBucket:
    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.stamp = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class RateLimiter:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, TokenBucket] = {}

    def allow(self, account_id: str) -> bool:
        bucket = self._buckets.get(account_id)
        if bucket is None:
            if len(self._buckets) > 100_000:  # forget idle accounts rather than grow forever
                self._buckets.clear()
            bucket = self._buckets[account_id] = TokenBucket(self.rate, self.burst)
        return bucket.take()

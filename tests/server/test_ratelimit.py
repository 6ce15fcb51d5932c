"""Token buckets on a clock the test moves (no test waits for a refill): the per-account limiter,
a connection's bucket, the per-address probe buckets and the webhook delivery buckets."""
from __future__ import annotations

from seed_agents.server.ratelimit import RateLimiter, TokenBucket
from seed_agents.server.transport.peers import AddressTable
from seed_agents.server.triggers.webhook import Deliveries


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_spends_its_burst_then_refills_at_its_rate():
    clock = FakeClock()
    bucket = TokenBucket(rate=4, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert not bucket.ready()
    clock.now += 0.125           # half a token
    assert not bucket.take()
    clock.now += 0.125           # one whole token
    assert bucket.ready() and bucket.ready()   # a look takes nothing
    assert bucket.take() and not bucket.take()
    clock.now += 3600            # never more than the burst
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_the_limiter_charges_each_account_alone_and_a_look_costs_nothing():
    clock = FakeClock()
    limiter = RateLimiter(rate=1, burst=2, clock=clock)
    assert limiter.ready("a") and limiter.ready("a")
    assert [limiter.take("a") for _ in range(3)] == [True, True, False]
    assert limiter.take("b")                  # another account's bucket is full
    assert not limiter.ready("a")
    clock.now += 1.0
    assert limiter.take("a") and not limiter.take("a")


def test_probe_and_delivery_buckets_run_on_the_given_clock():
    clock = FakeClock()
    table = AddressTable(max_per_address=4, probe_rate=2, probe_burst=2, clock=clock)
    assert [table.probe("10.0.0.1") for _ in range(3)] == [True, True, False]
    clock.now += 0.5
    assert table.probe("10.0.0.1") and not table.probe("10.0.0.1")
    deliveries = Deliveries(rate=1, clock=clock)
    assert [deliveries.allow("10.0.0.2") for _ in range(5)] == [True] * 4 + [False]
    clock.now += 1.0
    assert deliveries.allow("10.0.0.2") and not deliveries.allow("10.0.0.2")


def test_a_scaled_clock_runs_at_its_speed_and_a_bucket_refills_with_it(monkeypatch):
    """--rate-clock-speed (tests only, for a server in a child process): at 0.1 a second of the
    wall clock refills a tenth of a second's tokens; at 1 it is the wall clock itself."""
    import time

    from seed_agents.server import ratelimit

    assert ratelimit.scaled_clock(1.0) is time.monotonic
    wall = [500.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: wall[0])
    clock = ratelimit.scaled_clock(0.1)
    bucket = TokenBucket(rate=10, burst=5, clock=clock)
    assert all(bucket.take() for _ in range(5)) and not bucket.take()
    wall[0] += 0.5   # 0.05 s on the bucket's clock: half a token
    assert clock() == 500.05 and not bucket.take()
    wall[0] += 0.5
    assert bucket.take() and not bucket.take()

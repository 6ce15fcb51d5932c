"""The triggers' clock: what time it is for schedules, and one way to wait for a time.

`TriggerClock` is the server's wall clock, optionally shifted and sped up for test servers
(`--trigger-clock-speed`, `--trigger-clock-epoch-ms`, `--trigger-clock-offset-ms`): at speed S
its time is `epoch + offset + (wall - epoch) * S`, so several servers given one epoch agree on
it. Only the triggers read it (the slots, firings' times); signatures, sessions and runs keep
the real clock.

`wait_until(deadline, wake, cap)` is the scheduler's one timer: it returns at the deadline, when
`wake` is set (a trigger changed), or after `cap` real seconds, whichever comes first. Tests
hand in `ManualClock`, whose time moves only when told, so nothing in them sleeps.
"""
from __future__ import annotations

import asyncio
import time


class TriggerClock:
    def __init__(self, speed: float = 1.0, epoch_ms: int | None = None, offset_ms: int = 0) -> None:
        self.speed = speed
        self.epoch_ms = time.time_ns() // 1_000_000 if epoch_ms is None else epoch_ms
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        wall = time.time_ns() / 1_000_000
        return int(self.epoch_ms + self.offset_ms + (wall - self.epoch_ms) * self.speed)

    async def wait_until(self, deadline: int | None, wake: asyncio.Event, cap: float) -> None:
        delay = cap if deadline is None else min(cap, max(0.0, (deadline - self.now_ms()) / 1000 / self.speed))
        if delay <= 0 or wake.is_set():
            return
        try:
            async with asyncio.timeout(delay):
                await wake.wait()
        except TimeoutError:
            pass


class ManualClock:
    """A clock for tests: `advance` moves time and wakes whoever waits for it."""

    def __init__(self, now_ms: int) -> None:
        self._now = now_ms
        self._changed = asyncio.Event()

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms
        self._changed.set()

    def advance(self, ms: int) -> None:
        self.set(self._now + ms)

    async def wait_until(self, deadline: int | None, wake: asyncio.Event, cap: float) -> None:
        """Returns when the time reaches `deadline` or `wake` is set; `cap` (real seconds) is
        ignored: manual time never passes by itself."""
        while not wake.is_set() and (deadline is None or self._now < deadline):
            self._changed.clear()
            waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(self._changed.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()


def trigger_clock(config) -> TriggerClock | ManualClock:  # noqa: ANN001
    """The clock the settings name: a test's own (`config.trigger_clock`), else the wall clock
    shifted and sped up as the flags say."""
    return getattr(config, "trigger_clock", None) or TriggerClock(
        config.trigger_clock_speed, config.trigger_clock_epoch_ms, config.trigger_clock_offset_ms)

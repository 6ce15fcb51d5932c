"""tests/waiting.py itself: `until` returns what it found, and its bound holds for the whole wait."""
import asyncio
import time

import pytest

from tests.waiting import until, until_sync


async def test_until_returns_the_value_found():
    seen = iter([0, None, [], {"ok": 1}])
    assert await until(lambda: next(seen), 1, step=0) == {"ok": 1}


async def test_a_condition_that_hangs_is_cut_at_the_deadline():
    async def hangs():
        await asyncio.Event().wait()

    started = time.monotonic()
    with pytest.raises(TimeoutError, match="waited 0.2 s for the hang"):
        await until(hangs, 0.2, what="the hang")
    assert time.monotonic() - started < 1


async def test_the_conditions_own_timeout_is_not_taken_for_ours():
    async def times_out():
        raise TimeoutError("the call's own")

    with pytest.raises(TimeoutError, match="the call's own"):
        await until(times_out, 5)


def test_until_sync_names_the_last_value():
    with pytest.raises(TimeoutError, match="last: 0"):
        until_sync(lambda: 0, 0.05, step=0.01)

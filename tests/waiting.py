"""The one way a test waits: poll a condition, bounded in time, never a bare sleep for an outcome."""
from __future__ import annotations

import asyncio
import inspect
import math
import time
from typing import Any, Callable


async def until(condition: Callable[[], Any], timeout: float = 10.0, *, step: float = 0.02,
                what: str | None = None) -> Any:
    """Call `condition()` (plain or async) until it returns something truthy, and return that.
    After `timeout` seconds: TimeoutError naming `what` (or the condition) and its last value.
    The bound holds for the whole wait: an async condition still running at the deadline is
    cancelled. `math.inf`: no bound (a fake that holds a connection until its client goes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    value = None
    try:
        async with asyncio.timeout_at(deadline if math.isfinite(deadline) else None) as scope:
            while True:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                if loop.time() >= deadline:
                    break
                await asyncio.sleep(step)
    except TimeoutError:
        if not scope.expired():
            raise   # the condition's own timeout, not ours
    name = what or getattr(condition, "__name__", "a condition")
    raise TimeoutError(f"waited {timeout:g} s for {name}; last: {value!r}"[:2000])


def until_sync(condition: Callable[[], Any], timeout: float = 10.0, *, step: float = 0.02,
               what: str | None = None) -> Any:
    """`until` for code with no event loop (a child process starting, a file appearing)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            name = what or getattr(condition, "__name__", "a condition")
            raise TimeoutError(f"waited {timeout:g} s for {name}; last: {value!r}"[:2000])
        time.sleep(step)

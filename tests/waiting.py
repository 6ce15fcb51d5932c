"""The one way a test waits: poll a condition, bounded in time, never a bare sleep for an outcome."""
from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Callable


async def until(condition: Callable[[], Any], timeout: float = 10.0, *, step: float = 0.02,
                what: str | None = None) -> Any:
    """Call `condition()` (plain or async) until it returns something truthy, and return that.
    After `timeout` seconds: TimeoutError naming `what` (or the condition) and its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            name = what or getattr(condition, "__name__", "a condition")
            raise TimeoutError(f"waited {timeout:g} s for {name}; last: {value!r}"[:2000])
        await asyncio.sleep(step)


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

"""Race one function on several threads, released together by a barrier, and return what
they raised (an exception in a thread is otherwise lost)."""
from __future__ import annotations

import threading
from collections.abc import Callable


def race(fn: Callable[[], object], n: int, *, timeout: float = 60.0) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n, timeout=30)

    def run() -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(exc)
            barrier.abort()   # never leave the others waiting

    threads = [threading.Thread(target=run, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        errors.append(TimeoutError(f"{stuck} of {n} threads still running after {timeout} s"))
    return errors

"""How long a trigger that keeps failing waits before its next firing starts work: after n
failures in a row, 30 s * 2^(n-1), at most an hour; a single failure waits for nothing."""
from __future__ import annotations

BACKOFF_BASE_MS = 30_000
BACKOFF_MAX_MS = 3_600_000


def failure_backoff(failures: int) -> int | None:
    """The backoff (ms) after `failures` failed firings in a row, or None for none."""
    if failures <= 1:
        return None
    return min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (failures - 1))

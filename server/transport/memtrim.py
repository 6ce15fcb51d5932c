"""Give freed memory back to the system after connections end.

glibc keeps freed heap memory for reuse, so the megabytes a hostile connection made the server
hold (its bounded buffers) would stay in RSS after it is gone; `malloc_trim(0)` returns the free
pages. It runs once, a second after connections end (many ending together trim once). Elsewhere
than glibc it does nothing.
"""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util

DELAY = 1.0

try:
    _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    _trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):   # not glibc
    _trim = None

_pending = False


def soon() -> None:
    global _pending
    if _trim is None or _pending:
        return
    _pending = True
    asyncio.get_running_loop().call_later(DELAY, _run)


def _run() -> None:
    global _pending
    _pending = False
    _trim(0)

"""glibc malloc's mmap and trim thresholds fixed for the server's process, at start.

glibc moves both thresholds with what a process has freed (the mmap threshold rises to the size
of a freed mmapped block, the trim threshold to twice that), so two server processes running
the same code can settle in different states: in one, memory the writer frees at every commit
stays in its arena; in the other the top of the arena is given back to the kernel and faulted
in again on every turn. Measured (docs/performance.md, "The allocator's luck"): such a process's
database writer took 70-185 minor page faults a turn against under 1 for its twin, 250-330 us
more system time a turn, 15-23% more CPU a turn, for the whole life of the process. With the
thresholds fixed every process behaves like the lucky one.

The values: blocks under 4 MiB come from the arenas (a turn's largest buffers are well under
that; a frame is at most 1 MiB), and an arena keeps up to 64 MiB free at its top before giving
it back. Set `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` in the environment to choose
other values: glibc reads those itself, and this module then leaves both thresholds alone.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Mapping

log = logging.getLogger(__name__)

# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 4 << 20
TRIM_THRESHOLD = 64 << 20
ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def fix_thresholds(environ: Mapping[str, str] | None = None) -> bool:
    """Fix both thresholds, once at start; True when they were set here (glibc on Linux, and
    neither variable in `environ`), False where this is not glibc or the operator chose."""
    chosen = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or any(name in chosen for name in ENV) or not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt   # (the process's own symbols: libc's, no search)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # (mallopt answers 1 on success; setting the mmap threshold also stops glibc moving both)
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not done:
        log.warning("could not fix glibc malloc's thresholds; a turn may cost more in some processes")
    return done


def _glibc() -> bool:
    """Whether this process runs on glibc (musl, for one, has other thresholds or none)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False

"""server/allocator.py: glibc malloc's thresholds fixed at start, so no server process gives
the top of its arena back to the kernel and faults it in again at every turn. Checked in a
child process of its own (the thresholds are the process's), by where a 2 MiB block lands:
in a mapping of its own while glibc's default 128 KiB mmap threshold holds, in the heap once
the threshold is fixed above it; and by the page faults of buffers freed and taken again,
in the pattern that has a process fault at every turn under glibc's moving thresholds."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")

PROBE = r"""
import ctypes, json, resource, sys
from seed_agents.server import allocator
fixed = allocator.fix_thresholds() if sys.argv[1] == "fix" else False
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
def in_heap(address):   # the main arena's brk heap, where blocks under the mmap threshold go
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if start <= address < end:
                return True
    return False
block = libc.malloc(2 << 20)
own_mapping = not in_heap(block)
ctypes.memset(block, 1, 2 << 20)   # (its pages faulted in once, as a first turn would)
libc.free(block)
# glibc's own threshold is now 2 MiB (the mmapped block's size) and its trim threshold 4 MiB.
# A turn's buffers, each under the threshold, 6 MiB in all, taken at the top of the heap and
# freed: past the trim threshold that top goes back to the kernel, and comes again by faults.
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    blocks = [libc.malloc(1536 << 10) for _ in range(4)]
    for block in blocks:
        ctypes.memset(block, 1, 1536 << 10)
    for block in reversed(blocks):
        libc.free(block)
print(json.dumps({"fixed": fixed, "own_mapping": own_mapping,
                  "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults}))
"""


def probe(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                         env={**clean, **env}, check=True)
    return json.loads(out.stdout)


def test_fixed_thresholds_keep_a_turns_buffers_in_the_arena():
    default, fixed = probe("default"), probe("fix")
    assert default["fixed"] is False and default["own_mapping"] is True, default
    assert fixed["fixed"] is True and fixed["own_mapping"] is False, fixed
    # 20 rounds of 6 MiB of buffers: 1,536 pages a round when they go back each time; the first
    # round's may fault once when the buffers are kept
    assert default["faults"] > 19 * 1_000, default
    assert fixed["faults"] < 2_000, fixed


def test_an_operators_malloc_variables_are_left_to_glibc():
    chosen = probe("fix", MALLOC_MMAP_THRESHOLD_=str(1 << 30))
    assert chosen["fixed"] is False and chosen["own_mapping"] is False, chosen

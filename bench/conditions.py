"""The conditions every benchmark runs under, and the record of them (docs/performance.md):
the server process pinned to CPU 0, load processes and fake providers to CPU 1 (`taskset -c`);
when taskset is missing or either CPU is unavailable everything runs unpinned and the results
say so (`pinning()`).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER_CPU, LOAD_CPU = 0, 1

_TASKSET = shutil.which("taskset")


def pinning() -> dict:
    cpus = os.cpu_count() or 1
    try:
        usable = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = list(range(cpus))
    inherited = os.environ.get("BENCH_PINNED")   # set for load processes (pinned themselves)
    if inherited is not None:
        pinned = inherited == "1"
    else:
        pinned = bool(_TASKSET) and SERVER_CPU in usable and LOAD_CPU in usable
    if pinned:
        note = f"server on CPU {SERVER_CPU}, load client and fake provider on CPU {LOAD_CPU} (taskset -c)"
    elif not _TASKSET:
        note = "UNPINNED: taskset is missing; server and load share whatever CPUs the OS picks"
    else:
        note = f"UNPINNED: CPUs {SERVER_CPU} and {LOAD_CPU} are not both available (have {usable})"
    return {"pinned": pinned, "taskset": _TASKSET, "server_cpu": SERVER_CPU if pinned else None,
            "load_cpu": LOAD_CPU if pinned else None, "usable_cpus": usable, "note": note}


def pin_prefix(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if pinning()["pinned"] else []


def machine_info() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import platform

    return {"nproc": os.cpu_count(), "cpu_model": model, "python": sys.version.split()[0],
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pinning": pinning(),
            "data_dir_root": tempfile.gettempdir(), "nofile_limit": resource.getrlimit(resource.RLIMIT_NOFILE),
            "git": git_state()}


def git_state() -> dict:
    """The commit measured and any uncommitted changes to the server's code (others may be
    editing the same checkout while the bench runs)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = [line[3:] for line in git("status", "--porcelain", "--", "server", "protocol", "schema").splitlines()]
    return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s"),
            "uncommitted_server_changes": dirty}


def raise_nofile(want: int = 65536) -> int:
    """Raise the open-files soft limit as far as the hard limit allows; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft

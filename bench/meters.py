"""What a benchmark measures about processes while it runs: resident memory (`rss_kb`,
`RssSampler`) and CPU use per thread and per CPU (`CpuMeter`), all read from /proc."""
from __future__ import annotations

import os
import threading
import time

from bench.conditions import LOAD_CPU, SERVER_CPU, pinning
from bench.stats import summary


def rss_kb(pid: int) -> int:
    """VmRSS of a process in kB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


TICK_S = 1 / os.sysconf("SC_CLK_TCK")   # 10 ms here (USER_HZ 100)


def thread_stat(pid: int, tid: int | str) -> tuple[int, int, int] | None:
    """(user, system, minor page faults) of one thread so far, the first two as CPU time in clock
    ticks of TICK_S (utime, stime and minflt of /proc/PID/task/TID/stat); None when the thread
    is gone. A minor fault (a page touched for the first time, memory the allocator gave back
    to the kernel and took again) is system time. The kernel keeps the thread's run
    time exactly and splits it into user and system by which the sampled ticks fell in, shown
    rounded down to a whole tick: a difference of two readings is good to about a tick, so a
    figure needs tens of ticks (a few hundred ms of that thread's CPU) before its few percent
    mean anything. /proc/PID/task/TID/schedstat has the exact total, unsplit."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]), int(fields[12]), int(fields[7])
    except (OSError, ValueError, IndexError):
        return None


def thread_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of the main thread, of all other threads) of a process, from /proc."""
    main = other = 0.0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0
    for tid in tids:
        ticks = thread_stat(pid, tid)
        if ticks is None:
            continue
        secs = (ticks[0] + ticks[1]) * TICK_S   # utime + stime
        if int(tid) == pid:
            main += secs
        else:
            other += secs
    return main, other


def cpu_busy_seconds() -> dict[int, float]:
    """Busy (non-idle, non-iowait) CPU seconds per CPU since boot, from /proc/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("cpu") and line[3].isdigit():
                    name, *vals = line.split()
                    v = [int(x) for x in vals]
                    out[int(name[3:])] = (sum(v[:8]) - v[3] - v[4]) / tick
    except OSError:
        pass
    return out


class CpuMeter:
    """CPU use over a phase: the server's event-loop (main) thread, its other threads (the
    database writer, SQLite work), this (load) process, and what everything else on the
    machine took from the server's CPU and the load's CPU (other users' jobs on a shared box):
    `with CpuMeter(pid) as m: ...; m.result`. A main-thread share near 1.0 means the server's
    loop set the pace; a large `server_cpu_foreign` means a neighbour took the server's core."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.result: dict = {}

    def __enter__(self) -> "CpuMeter":
        self._t0 = time.perf_counter()
        self._p0 = time.process_time()
        self._s0 = cpu_busy_seconds()
        self._c0 = thread_cpu(self.pid) if self.pid else (0.0, 0.0)
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        load = (time.process_time() - self._p0) / wall
        stat = cpu_busy_seconds()
        busy = {c: (stat[c] - self._s0.get(c, 0.0)) / wall for c in stat}
        main, other = thread_cpu(self.pid) if self.pid else (0.0, 0.0)
        main = (main - self._c0[0]) / wall
        other = (other - self._c0[1]) / wall
        self.result = {"wall_s": round(wall, 3), "main_busy": main, "other_threads_busy": other,
                       "load_busy": load}
        if pinning()["pinned"]:
            self.result["server_cpu_foreign"] = max(0.0, busy.get(SERVER_CPU, 0.0) - main - other)
            self.result["load_cpu_foreign"] = max(0.0, busy.get(LOAD_CPU, 0.0) - load)


CPU_KEYS = ("main_busy", "other_threads_busy", "load_busy", "server_cpu_foreign", "load_cpu_foreign")


def cpu_summary(results: list[dict]) -> dict:
    """Median/min/max of each CpuMeter figure over runs (fractions of one CPU)."""
    return {k: summary([r[k] for r in results if k in r], 2) for k in CPU_KEYS
            if any(k in r for r in results)}


class RssSampler:
    """Samples a process's RSS every `interval` seconds on a thread (so a busy event loop in the
    load process does not delay the samples)."""

    def __init__(self, pid: int, interval: float = 0.01) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "RssSampler":
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), rss_kb(self.pid)))
            self._stop.wait(self.interval)

    def stop(self) -> "RssSampler":
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.samples.append((time.perf_counter(), rss_kb(self.pid)))
        return self

    @property
    def peak_kb(self) -> int:
        return max((kb for _, kb in self.samples), default=0)

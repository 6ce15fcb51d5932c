"""What the hostile-client tests measure of a server child process: its RSS and CPU time (from
/proc), and an honest client's latency while an attack runs."""
from __future__ import annotations

import asyncio
import os
import socket

from tests.waiting import until

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise LookupError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used, all threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Peak:
    """The server's peak RSS while something runs (every 20 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, rss(pid)
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, rss(self.pid))
            await asyncio.sleep(0.02)   # the sampling interval: a measurement, not a wait

    def stop(self) -> int:
        self.task.cancel()
        self.peak = max(self.peak, rss(self.pid))
        return self.peak


async def rss_settles_below(pid: int, limit: int, timeout: float) -> int:
    """The RSS once it is at most `limit`, or as it is when `timeout` runs out."""
    try:
        return await until(lambda: (now := rss(pid)) <= limit and now, timeout, step=0.25)
    except TimeoutError:
        return rss(pid)


TCP_ESTABLISHED = 1   # tcpi_state of Linux's TCP_INFO; a FIN or RST from the server leaves it


async def dropped(sock: socket.socket, timeout: float) -> bool:
    """Has the server closed or reset this connection within `timeout`? Seen in the socket's
    TCP state, without reading (reading would be the progress the server waits for)."""
    try:
        return await until(lambda: sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED,
                           timeout, step=0.1)
    except TimeoutError:
        return False


def raw_socket(port: int, rcvbuf: int = 4096) -> socket.socket:
    """A blocking-free TCP connection with a small receive buffer (so unread answers stay on
    the server's side)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def attackers(kind: str, port: int, seconds: float, count: int, *extra: str) -> "asyncio.subprocess.Process":
    """`count` attackers of `kind` (tests/hostile_attack.py) in a child process of their own;
    `finish(proc)` waits for it and returns what they saw."""
    import sys

    from tests.procs import ROOT

    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.hostile_attack", kind, str(port), str(seconds), str(count), *extra,
        cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=asyncio.subprocess.PIPE)


async def finish(proc) -> dict:
    import json

    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out
    return json.loads(out.decode().strip().splitlines()[-1])


class HonestReader:
    """An honest client reading its own session (GetSession) every 10 ms while an attack runs:
    `latencies` in seconds. Start it with `start()`, end it with `await stop()`."""

    def __init__(self, client, kp, session_id: str) -> None:  # noqa: ANN001
        self.client, self.kp, self.session_id = client, kp, session_id
        self.latencies: list[float] = []
        self.task: asyncio.Task | None = None
        self.stopping = False

    async def _run(self) -> None:
        import time

        from seed_agents.clients.raw import unique_ts

        while not self.stopping and len(self.latencies) < 100_000:
            t = time.perf_counter()
            r = await self.client.call(self.kp, {"_": "GetSession", "sessionId": self.session_id}, ts=unique_ts())
            assert r["_"] == "GetSessionResponse", r
            self.latencies.append(time.perf_counter() - t)
            await asyncio.sleep(0.01)   # the honest client's pace

    def start(self) -> "HonestReader":
        self.task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> list[float]:
        assert self.task is not None
        self.stopping = True   # (not cancelled: a read under way finishes, and is counted)
        await asyncio.wait_for(self.task, 60)
        return self.latencies

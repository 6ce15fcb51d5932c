"""Store bench: appends/s through Database and the event-loop lag it causes.

A ticker task sleeps 1 ms in a loop and records how late each wake-up is; meanwhile N writer
tasks append events through `await db.write(append_event, ...)` and a reader task replays
event bodies with `db.read` (reads run on the loop thread, so they show up in the lag too).
The lag is what every other socket on the server would feel. Run: python -m bench.bench_store
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid

from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import agents, events, sessions

PAYLOAD = {"type": "message", "role": "assistant", "content": "a reply of ordinary length " * 8,
           "meta": {"model": "bench", "provider": "echo", "durationMs": 12}}


def _setup(conn, n_sessions: int) -> None:
    agents.create_agent(conn, "bench-agent", "z6MkBench", {"name": "bench"}, "/tmp/bench", 1)
    for i in range(n_sessions):
        sessions.create_session(conn, f"bench-{i}", "z6MkBench", "bench-agent", None, 1)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _ticker(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(max(0.0, time.perf_counter() - start - 0.001))


async def _measure(path: str, writers: int, seconds: float, n_sessions: int = 8) -> dict:
    db = Database(path)
    await db.start()
    await db.write(_setup, n_sessions)
    stop = asyncio.Event()
    lags: list[float] = []
    write_latency: list[float] = []
    read_latency: list[float] = []
    appended = 0

    async def writer(i: int) -> None:
        nonlocal appended
        session_id = f"bench-{i % n_sessions}"
        while not stop.is_set():
            start = time.perf_counter()
            await db.write(events.append_event, session_id, PAYLOAD, str(uuid.uuid4()), int(time.time() * 1000))
            write_latency.append(time.perf_counter() - start)
            appended += 1

    async def reader() -> None:
        while not stop.is_set():
            start = time.perf_counter()
            db.read(events.event_bodies_after, "bench-0", 0, 100)  # a replay page
            read_latency.append(time.perf_counter() - start)
            await asyncio.sleep(0.005)

    batches0, jobs0 = db.batches, db.jobs
    tasks = [asyncio.create_task(_ticker(stop, lags)), asyncio.create_task(reader())]
    tasks += [asyncio.create_task(writer(i)) for i in range(writers)]
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    batches = db.batches - batches0
    await db.close()
    ms = 1000.0
    return {
        "writers": writers,
        "seconds": round(elapsed, 2),
        "appends": appended,
        "appends_per_s": round(appended / elapsed),
        "commits_per_s": round(batches / elapsed),
        "mean_batch": round((db.jobs - jobs0) / batches, 1) if batches else 0.0,
        "write_p50_ms": round(_pct(write_latency, 0.50) * ms, 2),
        "write_p99_ms": round(_pct(write_latency, 0.99) * ms, 2),
        "read_page_p99_ms": round(_pct(read_latency, 0.99) * ms, 3),
        "loop_lag_p50_ms": round(_pct(lags, 0.50) * ms, 3),
        "loop_lag_p99_ms": round(_pct(lags, 0.99) * ms, 3),
        "loop_lag_max_ms": round(max(lags, default=0.0) * ms, 3),
        "loop_lag_mean_ms": round(statistics.fmean(lags) * ms, 3) if lags else 0.0,
    }


async def _run(quick: bool, directory: str | None) -> dict:
    seconds = 1.0 if quick else 3.0
    configs = [0, 1, 16, 64] if not quick else [0, 16]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=directory) as tmp:
        for n in configs:
            results.append(await _measure(os.path.join(tmp, f"bench-{n}.sqlite"), n, seconds))
    return {"bench": "store", "quick": quick, "synchronous": "FULL", "journal_mode": "WAL",
            "directory": directory or tempfile.gettempdir(), "runs": results}


def run(quick: bool = False, directory: str | None = None) -> dict:
    """Measure and return the figures (the bench runner collects this dict)."""
    return asyncio.run(_run(quick, directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, fewer writer counts")
    parser.add_argument("--dir", default=None, help="where to put the database (default: the temp dir)")
    args = parser.parse_args()
    print(json.dumps(run(args.quick, args.dir), indent=2))


if __name__ == "__main__":
    main()

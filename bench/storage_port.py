"""The storage port's two drivers side by side: what PostgreSQL costs against SQLite, per call.

`python -m bench.storage_port [--url postgresql://...] [--ops N]` (the URL defaults to
SEED_AGENTS_TEST_POSTGRES_URL; loopback only). Through the port (server.storage), in one process,
each driver on a fresh store:

- append: `transaction(tx.append_event)` on one session, at concurrency 1 and 16 (16 sessions of
  one agent; and 16 sessions of 16 agents: every append also writes its agent's activity rollup,
  so appends to one agent's sessions take turns on the agent's row);
- page: `event_page` of 50 events (a replay page);
- claim: `claim_run` + `finish_run` of queued runs (the queue round trip of one turn).

Reports operations per second and the ratio PostgreSQL / SQLite. Bounded by --ops per cell and
--seconds per cell. This is the port alone, not a server: the `cluster` benchmark (a server on
each driver, two servers against one) is still to be written (docs/storage.md).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid

T0 = 1_700_000_000_000


async def _setup(store, sessions: int) -> None:
    async def work(tx):
        await tx.ensure_account("acct", T0)
        await tx.create_agent("a1", "acct", {"name": "bench"}, "/tmp/a1", T0)
        for i in range(sessions):
            await tx.create_session(f"s{i}", "acct", "a1", None, T0)
            await tx.create_agent(f"b{i}", "acct", {"name": "bench"}, f"/tmp/b{i}", T0)
            await tx.create_session(f"u{i}", "acct", f"b{i}", None, T0)
    await store.transaction(work)


async def _timed(n_tasks: int, per_task: int, seconds: float, op) -> float:
    deadline = time.monotonic() + seconds
    done = 0

    async def worker(k: int) -> None:
        nonlocal done
        for i in range(per_task):
            if time.monotonic() > deadline:
                return
            await op(k, i)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(n_tasks)))
    return done / (time.perf_counter() - started)


async def _measure(store, ops: int, seconds: float) -> dict:
    await _setup(store, 16)
    payload = {"type": "assistant", "text": "x" * 200}
    out = {}

    async def append(k: int, i: int) -> None:
        await store.transaction(lambda tx: tx.append_event(f"s{k}", payload, uuid.uuid4().hex, T0))

    out["append.c1"] = await _timed(1, ops, seconds, append)
    out["append.c16"] = await _timed(16, max(1, ops // 16), seconds, append)

    async def append_own_agent(k: int, i: int) -> None:
        await store.transaction(lambda tx: tx.append_event(f"u{k}", payload, uuid.uuid4().hex, T0))

    out["append.c16.16agents"] = await _timed(16, max(1, ops // 16), seconds, append_own_agent)

    async def page(k: int, i: int) -> None:
        rows, _ = await store.event_page("s0", 0, 50, 1 << 20)
        assert rows

    out["page50.c1"] = await _timed(1, ops, seconds, page)

    n_runs = min(ops, 500)
    for i in range(n_runs):
        await store.transaction(lambda tx, i=i: tx.enqueue_run(f"r{i}", "acct", "a1", None, None, T0 + i))

    async def claim(k: int, i: int) -> None:
        run = await store.claim_run("bench", 30_000, T0 + 1_000_000)
        if run is not None:
            await store.finish_run(run["id"], "bench", "succeeded", None, T0 + 1_000_001)

    out["claim+finish.c1"] = await _timed(1, n_runs, seconds, claim)
    return out


async def measure(url: str | None, ops: int, seconds: float) -> dict:
    from server.storage import make_storage
    from server.storage.url import sqlite_url

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = make_storage(sqlite_url(os.path.join(tmp, "agents.sqlite")))
        await store.open()
        try:
            results["sqlite"] = await _measure(store, ops, seconds)
        finally:
            await store.close()
    if url:
        import psycopg

        schema = "bench_" + uuid.uuid4().hex[:12]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in url else "?"
            store = make_storage(f"{url}{sep}options=-c%20search_path%3D{schema}", pool_size=16)
            await store.open()
            try:
                results["postgresql"] = await _measure(store, ops, seconds)
            finally:
                await store.close()
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    report = {driver: {k: round(v) for k, v in cells.items()} for driver, cells in results.items()}
    if "postgresql" in results:
        report["ratio_postgresql_over_sqlite"] = {
            k: round(results["postgresql"][k] / results["sqlite"][k], 2) for k in results["sqlite"]}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SEED_AGENTS_TEST_POSTGRES_URL"))
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.url:
        host = args.url.split("@")[-1].split("/")[0].split(":")[0].split("?")[0]
        if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
            print("loopback only: the benchmark refuses a non-loopback host", file=sys.stderr)
            return 2
    print(json.dumps(asyncio.run(measure(args.url, args.ops, args.seconds)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

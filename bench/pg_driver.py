"""Choose the PostgreSQL driver by measurement: psycopg 3 (+ psycopg_pool) against asyncpg.

`python -m bench.pg_driver [--url postgresql://...] [--ops N]` (the URL defaults to
SEED_AGENTS_TEST_POSTGRES_URL). On loopback, through each driver's own pool (as the server would
use it), it times two operations the store does all the time:

- write: BEGIN; INSERT one row; COMMIT (an explicit transaction, as every store write is);
- read: an indexed SELECT of one row by key;

at concurrency 1 (one task) and 16 (16 tasks on a pool of 16 connections). Both drivers run in
this one process, in alternating rounds, against the same tables; the report is operations per
second and the ratio psycopg / asyncpg. Bounded: --ops operations per cell, each cell at most
--seconds. Work happens in a schema of its own, dropped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

CONCURRENCY = (1, 16)


async def _psycopg_pool(url: str, schema: str, size: int):
    from psycopg_pool import AsyncConnectionPool

    # Autocommit connections: a read is one round trip, a write opens its own transaction.
    pool = AsyncConnectionPool(url, min_size=size, max_size=size, open=False,
                               kwargs={"autocommit": True, "options": f"-c search_path={schema}"})
    await pool.open(wait=True)
    return pool


async def _asyncpg_pool(url: str, schema: str, size: int):
    import asyncpg

    return await asyncpg.create_pool(url, min_size=size, max_size=size,
                                     server_settings={"search_path": schema})


def _psycopg_ops(pool):
    async def write(key: str) -> None:
        async with pool.connection() as conn:
            async with conn.transaction():
                await conn.execute("INSERT INTO bench_rows (k, v) VALUES (%s, %s)", (key, b"x" * 64))

    async def read(key: str) -> None:
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT v FROM bench_rows WHERE k = %s", (key,))
            if await cur.fetchone() is None:
                raise RuntimeError("row missing")

    return write, read


def _asyncpg_ops(pool):
    async def write(key: str) -> None:
        async with pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("INSERT INTO bench_rows (k, v) VALUES ($1, $2)", key, b"x" * 64)

    async def read(key: str) -> None:
        async with pool.acquire() as conn:
            if await conn.fetchrow("SELECT v FROM bench_rows WHERE k = $1", key) is None:
                raise RuntimeError("row missing")

    return write, read


async def _cell(op, keys: list[str], concurrency: int, seconds: float) -> float:
    """Operations per second of `op` over `keys`, split across `concurrency` tasks."""
    deadline = time.monotonic() + seconds
    done = 0

    async def worker(part: list[str]) -> None:
        nonlocal done
        for key in part:
            if time.monotonic() > deadline:
                return
            await op(key)
            done += 1

    parts = [keys[i::concurrency] for i in range(concurrency)]
    started = time.perf_counter()
    await asyncio.gather(*(worker(p) for p in parts))
    return done / (time.perf_counter() - started)


async def measure(url: str, ops: int, seconds: float, rounds: int) -> dict:
    import psycopg

    schema = "bench_" + uuid.uuid4().hex[:12]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        await admin.execute(f"CREATE SCHEMA {schema}")
        await admin.execute(f"CREATE TABLE {schema}.bench_rows (k text PRIMARY KEY, v bytea NOT NULL)")
    try:
        pools = {"psycopg": await _psycopg_pool(url, schema, max(CONCURRENCY)),
                 "asyncpg": await _asyncpg_pool(url, schema, max(CONCURRENCY))}
        opsets = {"psycopg": _psycopg_ops(pools["psycopg"]), "asyncpg": _asyncpg_ops(pools["asyncpg"])}
        best: dict[str, float] = {}
        for rnd in range(rounds):
            for driver in (("psycopg", "asyncpg") if rnd % 2 == 0 else ("asyncpg", "psycopg")):
                write, read = opsets[driver]
                for conc in CONCURRENCY:
                    keys = [f"{driver}-{rnd}-{conc}-{i}" for i in range(ops)]
                    w = await _cell(write, keys, conc, seconds)
                    r = await _cell(read, keys[: max(1, int(w * seconds))][:ops], conc, seconds)
                    for name, value in ((f"{driver}.write.c{conc}", w), (f"{driver}.read.c{conc}", r)):
                        best[name] = max(best.get(name, 0.0), value)
        await pools["psycopg"].close()
        await pools["asyncpg"].close()
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            await admin.execute(f"DROP SCHEMA {schema} CASCADE")
    report = {"ops_per_s": {k: round(v) for k, v in sorted(best.items())}, "ratio_psycopg_over_asyncpg": {}}
    for op in ("write", "read"):
        for conc in CONCURRENCY:
            p, a = best[f"psycopg.{op}.c{conc}"], best[f"asyncpg.{op}.c{conc}"]
            report["ratio_psycopg_over_asyncpg"][f"{op}.c{conc}"] = round(p / a, 2)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SEED_AGENTS_TEST_POSTGRES_URL"))
    parser.add_argument("--ops", type=int, default=2000, help="operations per cell")
    parser.add_argument("--seconds", type=float, default=5.0, help="time bound per cell")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds; best of them")
    args = parser.parse_args(argv)
    if not args.url:
        print("no PostgreSQL: pass --url or set SEED_AGENTS_TEST_POSTGRES_URL", file=sys.stderr)
        return 2
    if not args.url.startswith(("postgresql://", "postgres://")):
        print("the URL must be postgresql://...", file=sys.stderr)
        return 2
    host = args.url.split("@")[-1].split("/")[0].split(":")[0]
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        print("loopback only: the benchmark refuses a non-loopback host", file=sys.stderr)
        return 2
    report = asyncio.run(measure(args.url, args.ops, args.seconds, args.rounds))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

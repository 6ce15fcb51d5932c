"""`seed-agents import` (issue 37): events per second imported from a reference data directory of
100,000 events (the reference's own fixture, tests/reference_data/, its sessions copied by
tests/reference_data/grow.py until it holds that many), into SQLite, and into PostgreSQL when
SEED_AGENTS_TEST_POSTGRES_URL is set.

Two rates per target, from one run: events per second of wall time (what a person waits), and
events per second of the import process's CPU time (user + system, its writer thread included),
which a shared, loaded machine moves far less than the wall time. The goal is 100,000 events/s;
each figure is also given as its ratio to that goal, with the machine's load beside it.

`python -m bench.import_rate [--events N] [--runs R]` prints the figures as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.conditions import git_state, machine_info
from tests.reference_data.grow import grow

GOAL = 100_000
ROOT = Path(__file__).resolve().parents[1]


def one_run(ref: Path, work: Path, storage_url: str | None) -> dict:
    out = work / f"ours-{uuid.uuid4().hex[:8]}"
    args = [sys.executable, "-m", "seed_agents", "import", str(ref), "--data-dir", str(out)]
    if storage_url:
        args += ["--storage-url", storage_url]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"import failed ({done.returncode}): {done.stderr[-2000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("events ")][0].split()
    events = int(line[-3])   # the summary's IMPORTED column
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shutil.rmtree(out, ignore_errors=True)
    return {"events": events, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "events_per_s": round(events / wall), "events_per_cpu_s": round(events / cpu),
            "load_1m": round(os.getloadavg()[0], 1)}


def fresh_pg_schema(base: str) -> tuple[str, callable]:
    import psycopg

    from tests.pg import with_schema

    schema = "bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return with_schema(base, schema), drop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.import_rate")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        ref = work / "ref"
        total = grow(ref, args.events)
        result = {"bench": "import_rate", "reference_events": total, "goal_events_per_s": GOAL,
                  "machine": machine_info(), "git": git_state(), "targets": {}}
        targets = [("sqlite", None)]
        base = os.environ.get("SEED_AGENTS_TEST_POSTGRES_URL", "").strip()
        if base:
            targets.append(("postgresql", base))
        for name, pg in targets:
            runs = []
            for _ in range(args.runs):
                url, drop = fresh_pg_schema(pg) if pg else (None, lambda: None)
                try:
                    runs.append(one_run(ref, work, url))
                finally:
                    drop()
            best = max(runs, key=lambda r: r["events_per_s"])
            result["targets"][name] = {
                "runs": runs,
                "best_events_per_s": best["events_per_s"],
                "best_events_per_cpu_s": max(r["events_per_cpu_s"] for r in runs),
                "ratio_to_goal_wall": round(best["events_per_s"] / GOAL, 3),
                "ratio_to_goal_cpu": round(max(r["events_per_cpu_s"] for r in runs) / GOAL, 3),
            }
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

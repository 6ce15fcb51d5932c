"""`seed-agents import` (issue 37): events per second imported from a reference data directory of
100,000 events (the reference's own fixture, tests/reference_data/, its sessions copied by
tests/reference_data/grow.py until it holds that many), into SQLite, and into PostgreSQL when
SEED_AGENTS_TEST_POSTGRES_URL is set.

Two rates per run: events per second of wall time (what a person waits), and events per second
of CPU time (user + system of the import process and its worker processes), which a shared,
loaded machine moves far less than the wall time. The goal is 100,000 events/s of wall time.

Before and after in one run: `--before REF` (a git ref, extracted with `git archive` into a
temporary directory; default 48681c8, main before the import's speed work) against this working
tree. Each round imports the same reference into a fresh target with, in turn (the order
reversed every other round, so drift of the shared machine falls on all alike): the before tree
(A), this tree with its default `--jobs` (B), this tree with `--jobs 1` (B1, everything in one
process), and the before tree again (A2: the A/A pair says how far two runs of the same code
differ here). Reported per variant: the median over the rounds; per comparison (B/A, B1/A,
A2/A) the ratio of those medians and the per-round ratios. Nothing is asserted.

`python -m bench.import_rate [--events N] [--rounds R] [--before REF] [--sqlite-only]` prints JSON.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from bench.conditions import git_state, machine_info
from tests.reference_data.grow import grow

GOAL = 100_000
ROOT = Path(__file__).resolve().parents[1]
BEFORE = "48681c8"


def extract(ref: str, into: Path) -> Path:
    """The tree at git `ref` (the folders `python -m seed_agents` needs), unpacked into `into`."""
    data = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def one_run(tree: Path, ref: Path, work: Path, storage_url: str | None, extra: list[str]) -> dict:
    out = work / f"ours-{uuid.uuid4().hex[:8]}"
    args = [sys.executable, "-m", "seed_agents", "import", str(ref), "--data-dir", str(out), *extra]
    if storage_url:
        args += ["--storage-url", storage_url]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=str(tree), env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True,
                          text=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)   # the import and its workers, all waited for
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


def summarize(runs: dict[str, list[dict]]) -> dict:
    out: dict = {"variants": {}, "ratios": {}}
    for name, rs in runs.items():
        out["variants"][name] = {
            "runs": rs,
            "median_events_per_s": round(statistics.median(r["events_per_s"] for r in rs)),
            "median_events_per_cpu_s": round(statistics.median(r["events_per_cpu_s"] for r in rs)),
        }
    base = out["variants"]["A"]
    for name in ("B", "B1", "A2"):
        v = out["variants"][name]
        out["ratios"][f"{name}/A"] = {
            key: {"of_medians": round(v[f"median_{key}"] / base[f"median_{key}"], 2),
                  "per_round": [round(r[key] / a[key], 2) for r, a in zip(v["runs"], base["runs"])]}
            for key in ("events_per_s", "events_per_cpu_s")}
    b = out["variants"]["B"]
    out["ratio_to_goal_wall"] = round(b["median_events_per_s"] / GOAL, 3)
    out["ratio_to_goal_cpu"] = round(b["median_events_per_cpu_s"] / GOAL, 3)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.import_rate")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=BEFORE, help=f"git ref of the tree to compare with (default {BEFORE})")
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 20:
        raise SystemExit("--rounds must be 1 to 20")
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        ref = work / "ref"
        total = grow(ref, args.events)
        before = extract(args.before, work / "before")
        variants = {"A": (before, []), "B": (ROOT, []), "B1": (ROOT, ["--jobs", "1"]), "A2": (before, [])}
        result = {"bench": "import_rate", "reference_events": total, "goal_events_per_s": GOAL,
                  "before": args.before, "after": "this tree", "jobs_default": os.cpu_count(),
                  "machine": machine_info(), "git": git_state(), "targets": {}}
        targets = [("sqlite", None)]
        base = os.environ.get("SEED_AGENTS_TEST_POSTGRES_URL", "").strip()
        if base and not args.sqlite_only:
            targets.append(("postgresql", base))
        for name, pg in targets:
            runs: dict[str, list[dict]] = {v: [] for v in variants}
            for round_no in range(args.rounds):
                order = list(variants) if round_no % 2 == 0 else list(reversed(variants))
                for v in order:
                    tree, extra = variants[v]
                    url, drop = fresh_pg_schema(pg) if pg else (None, lambda: None)
                    try:
                        runs[v].append(one_run(tree, ref, work, url, extra))
                    finally:
                        drop()
                    print(f"{name} round {round_no} {v}: {runs[v][-1]}", file=sys.stderr)
            result["targets"][name] = summarize(runs)
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

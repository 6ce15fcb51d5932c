"""Run the benchmark suite: `python -m bench.run [--quick] [--only NAME ...]` (`make bench`,
`make bench-quick`).

Each benchmark starts a real server on loopback pinned to CPU 0 with a fresh database and
loads it from a separate process pinned to CPU 1 (bench.processes). Prints a table (our figure,
the target, the TypeScript reference on Bun, pass/miss) and writes bench/results.json. Nothing
here asserts a timing: targets are for the report.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.conditions import SERVER_CPU, git_state, machine_info
from bench.meters import cpu_busy_seconds
from bench.processes import RAISED_BOUNDS, RAISED_LIMITS, run_load
from bench.stats import percentile

RESULTS = Path(__file__).resolve().parent / "results.json"
ORDER = ("verify", "store", "rpc", "http", "replay", "fanout", "turns", "idle", "sustained")


# -- running -------------------------------------------------------------------------------------
def _bench_verify(quick: bool) -> dict:
    # On the server's CPU, while no server runs: the cryptographic limit of that core.
    return run_load("bench.bench_verify:run", {"quick": quick}, cpu=SERVER_CPU, timeout=300)


def _bench_store(quick: bool) -> dict:
    return run_load("bench.bench_store:run", {"quick": quick}, cpu=SERVER_CPU, timeout=300)


def _module_run(name: str):
    def go(quick: bool) -> dict:
        import importlib

        return importlib.import_module(f"bench.{name}").run(quick=quick)
    return go


RUNNERS = {"verify": _bench_verify, "store": _bench_store,
           **{n: _module_run(n) for n in ("rpc", "http", "replay", "fanout", "turns", "idle", "sustained")}}


def fsync_probe(n: int = 30) -> dict:
    """Latency of write(4 KiB) + fsync in the temp dir, where the benchmark databases live:
    every acknowledged write waits for at least one such commit."""
    lat = []
    fd, path = tempfile.mkstemp(prefix="bench-fsync-")
    try:
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
            lat.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    return {"p50_ms": round(percentile(lat, 50), 3), "p99_ms": round(percentile(lat, 99), 3)}


def busy_now(seconds: float = 0.5) -> dict[int, float]:
    """Share of each CPU that was busy over the next `seconds` (before a benchmark starts)."""
    a = cpu_busy_seconds()
    time.sleep(seconds)
    b = cpu_busy_seconds()
    return {c: round((b[c] - a.get(c, 0.0)) / seconds, 2) for c in b}


def wait_quiet(limit: float, threshold: float = 0.2) -> dict[int, float]:
    """Wait (at most `limit` s) until every CPU is less than `threshold` busy (0.5 s samples)."""
    deadline = time.monotonic() + limit
    busy = busy_now()
    while max(busy.values(), default=0) >= threshold and time.monotonic() < deadline:
        busy = busy_now()
    return busy


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


# -- the table -----------------------------------------------------------------------------------
def _get(d, path: str):
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _fmt(v, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "/s":
        return f"{v:,.0f}/s"
    if unit == "ms":
        return f"{v:.2f} ms" if v < 10 else f"{v:.1f} ms"
    if unit == "MB":
        return f"{v:.1f} MB"
    if unit == "KB":
        return f"{v:.1f} KB"
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "x":
        return f"{v:.3f}"
    return str(v)


def _ours(d, path: str, unit: str) -> tuple[float | None, str]:
    v = _get(d, path)
    if isinstance(v, dict) and "median" in v:
        med = v["median"]
        if v["min"] is not None and v["min"] != v["max"]:
            return med, f"{_fmt(med, unit)} [{_fmt(v['min'], unit)}-{_fmt(v['max'], unit)}]"
        return med, _fmt(med, unit)
    return v, _fmt(v, unit)


# (benchmark, label, path in its results, unit, target test or None, target text, TS reference)
ROWS = [
    ("verify", "envelopes verified/s (MessageSession)", "envelopes_per_s", "/s", None, "", "-"),
    ("verify", "ratio to raw Ed25519 verify", "ratio", "x", lambda v: v >= 0.85, ">= 0.85", "-"),
    ("store", "appends/s, 16 writers", "runs.16w.appends_per_s", "/s", None, "", "-"),
    ("store", "loop lag p99, 16 writers", "runs.16w.loop_lag_p99_ms", "ms", None, "", "-"),
    ("rpc", "GetSession c1 actions/s", "GetSession_c1.actions_per_s", "/s", None, "", "-"),
    ("rpc", "GetSession c1 p50", "GetSession_c1.p50_ms", "ms", lambda v: v < 0.5, "< 0.5 ms", "0.85 ms"),
    ("rpc", "GetSession c1 p99", "GetSession_c1.p99_ms", "ms", None, "", "-"),
    ("rpc", "GetSession c8 actions/s", "GetSession_c8.actions_per_s", "/s", None, "", "-"),
    ("rpc", "GetSession c8 p99", "GetSession_c8.p99_ms", "ms", None, "", "-"),
    ("rpc", "GetSession c64 actions/s", "GetSession_c64.actions_per_s", "/s", lambda v: v >= 4000, ">= 4,000/s", "1,250/s"),
    ("rpc", "GetSession c64 p50", "GetSession_c64.p50_ms", "ms", None, "", "-"),
    ("rpc", "GetSession c64 p99", "GetSession_c64.p99_ms", "ms", lambda v: v < 30, "< 30 ms", "94 ms"),
    ("rpc", "GetSession c64 / raw verify/s", "GetSession_c64.ratio_to_raw_verify", "x", None, "", "-"),
    ("rpc", "CreateSession c1 actions/s", "CreateSession_c1.actions_per_s", "/s", None, "", "-"),
    ("rpc", "CreateSession c1 p50", "CreateSession_c1.p50_ms", "ms", None, "", "-"),
    ("rpc", "CreateSession c1 p99", "CreateSession_c1.p99_ms", "ms", None, "", "-"),
    ("rpc", "CreateSession c8 actions/s", "CreateSession_c8.actions_per_s", "/s", None, "", "1,220/s"),
    ("rpc", "CreateSession c8 p99", "CreateSession_c8.p99_ms", "ms", None, "", "-"),
    ("rpc", "CreateSession c64 actions/s", "CreateSession_c64.actions_per_s", "/s", None, "", "-"),
    ("rpc", "CreateSession c64 p99", "CreateSession_c64.p99_ms", "ms", None, "", "-"),
    ("rpc", "CreateSession c64 / raw verify/s", "CreateSession_c64.ratio_to_raw_verify", "x", None, "", "-"),
    ("rpc", "raw Ed25519 verifies/s (GetSession input)", "raw_verify.GetSession.raw_verifies_per_s", "/s", None, "", "-"),
    ("http", "GetSession c1 actions/s", "GetSession_c1.actions_per_s", "/s", None, "", "-"),
    ("http", "GetSession c1 p50", "GetSession_c1.p50_ms", "ms", None, "", "-"),
    ("http", "GetSession c8 actions/s", "GetSession_c8.actions_per_s", "/s", None, "", "-"),
    ("http", "GetSession c64 actions/s", "GetSession_c64.actions_per_s", "/s", None, "", "-"),
    ("http", "GetSession c64 / raw verify/s", "GetSession_c64.ratio_to_raw_verify", "x", None, "", "-"),
    ("http", "CreateSession c1 actions/s", "CreateSession_c1.actions_per_s", "/s", None, "", "-"),
    ("http", "CreateSession c8 actions/s", "CreateSession_c8.actions_per_s", "/s", None, "", "-"),
    ("http", "CreateSession c64 actions/s", "CreateSession_c64.actions_per_s", "/s", None, "", "-"),
    ("http", "CreateSession c64 / raw verify/s", "CreateSession_c64.ratio_to_raw_verify", "x", None, "", "-"),
    ("http", "CreateSession c8 / raw verify/s", "CreateSession_c8.ratio_to_raw_verify", "x", lambda v: v >= 0.30,
     ">= 0.30", "-"),
    ("http", "CreateSession c8 p99", "CreateSession_c8.p99_ms", "ms", None, "", "-"),
    ("http", "CreateSession c64 p99", "CreateSession_c64.p99_ms", "ms", None, "", "-"),
    ("http", "MessageSession c8 accepts/s", "MessageSession_c8.actions_per_s", "/s", None, "", "-"),
    ("http", "MessageSession c8 / raw verify/s", "MessageSession_c8.ratio_to_raw_verify", "x", None, "", "-"),
    ("http", "MessageSession c64 accepts/s", "MessageSession_c64.actions_per_s", "/s", None, "", "-"),
    ("http", "MessageSession c64 / raw verify/s", "MessageSession_c64.ratio_to_raw_verify", "x", None, "", "-"),
    ("http", "MessageSession c64 p99", "MessageSession_c64.p99_ms", "ms", None, "", "-"),
    ("http", "h11 us per request (parse + answer head)", "parsers.h11.us_per_request", "x", None, "", "-"),
    ("http", "httptools us per request (chosen)", "parsers.httptools.us_per_request", "x", None, "", "-"),
    ("replay", "10k events: events/s", "10k.events_per_s", "/s", None, "", "-"),
    ("replay", "100k events: time to last event", "100k.seconds", "s", None, "", "1.8 s"),
    ("replay", "100k events: events/s", "100k.events_per_s", "/s", lambda v: v >= 250_000, ">= 250,000/s", "56,000/s"),
    ("replay", "100k: RSS before", "100k.rss_before_mb", "MB", None, "", "130 MB"),
    ("replay", "100k: RSS peak", "100k.rss_peak_mb", "MB", None, "", "> 1 GB"),
    ("replay", "100k: RSS growth at peak", "100k.rss_growth_mb", "MB", lambda v: v < 50, "< 50 MB", "> 870 MB"),
    ("replay", "100k: RSS after 3 replays - before", "100k.rss_back_mb", "MB", lambda v: v < 5,
     "back to baseline (< 5 MB)", "-"),
    ("fanout", "200 sockets: p50", "200.p50_ms", "ms", None, "", "-"),
    ("fanout", "200 sockets: p99", "200.p99_ms", "ms", lambda v: v < 30, "< 30 ms", "28-43 ms"),
    ("fanout", "200 sockets: max", "200.max_ms", "ms", None, "", "-"),
    ("fanout", "1,000 sockets: p50", "1000.p50_ms", "ms", None, "", "-"),
    ("fanout", "1,000 sockets: p99", "1000.p99_ms", "ms", lambda v: v < 100, "< 100 ms", "-"),
    ("fanout", "1,000 sockets: max", "1000.max_ms", "ms", None, "", "-"),
    ("turns", "echo turn p50", "echo.p50_ms", "ms", None, "", "8 ms"),
    ("turns", "echo turn p99", "echo.p99_ms", "ms", lambda v: v < 10, "< 10 ms", "16-25 ms"),
    ("turns", "fake-provider turn p50", "fake.p50_ms", "ms", None, "", "8 ms"),
    ("turns", "fake-provider turn p99", "fake.p99_ms", "ms", lambda v: v < 15, "< 15 ms", "16-25 ms"),
    ("idle", "RSS per idle subscribed socket", "per_socket_kb", "KB", lambda v: v < 50, "< 50 KB", "-"),
    ("idle", "server RSS at start", "server_rss_start_mb", "MB", lambda v: v < 60, "< 60 MB", "-"),
    ("sustained", "highest rate passing a short probe", "highest_probe_rate", "/s", None, "", "-"),
    ("sustained", "highest turn rate, p99 < 250 ms, no error", "highest_passing_rate", "/s", None, "", "-"),
    ("sustained", "  turn p50 at that rate", "sustained.turn_p50_ms", "ms", None, "", "-"),
    ("sustained", "  turn p99 at that rate (whole run)", "sustained.turn_p99_ms", "ms", None, "< 250 ms", "-"),
    ("sustained", "  turn p99 at that rate (10 s windows)", "sustained.window_p99_ms", "ms", None, "", "-"),
    ("sustained", "  loop lag (ping RTT) p99 at that rate", "sustained.loop_lag_p99_ms", "ms", None, "", "-"),
    ("sustained", "  loop lag (ping RTT) max at that rate", "sustained.loop_lag_max_ms", "ms", None, "", "-"),
]


def _derive(results: dict) -> None:
    """Figures computed from others, and store runs keyed by writer count."""
    store = results.get("store")
    if isinstance(store, dict) and isinstance(store.get("runs"), list):
        store["runs"] = {f"{r['writers']}w": r for r in store["runs"]}
    replay = results.get("replay")
    if isinstance(replay, dict) and "100k" in replay:
        r = replay["100k"]
        if r.get("rss_after_3_replays_mb") is not None:
            r["rss_back_mb"] = round(r["rss_after_3_replays_mb"] - r["rss_before_mb"], 1)


def _foreign(data, key: str) -> list[float]:
    """Every median `key` (a CpuMeter figure) found in a benchmark's results."""
    found = []
    if isinstance(data, dict):
        for k, v in data.items():
            if k == key and isinstance(v, dict) and v.get("median") is not None:
                found.append(v["median"])
            elif k == key and isinstance(v, (int, float)):
                found.append(float(v))
            else:
                found += _foreign(v, key)
    elif isinstance(data, list):
        for v in data:
            found += _foreign(v, key)
    return found


def noise(data) -> str:
    """The largest share of the server's / the load's CPU that other processes took during the
    benchmark's timed phases (medians over runs); '-' when not measured."""
    s, l = _foreign(data, "server_cpu_foreign"), _foreign(data, "load_cpu_foreign")
    if not s and not l:
        return "-"
    return f"{max(s, default=0):.0%}/{max(l, default=0):.0%}"


def table(results: dict, names) -> list[dict]:
    rows = []
    for bench, label, path, unit, test, target, ts in ROWS:
        if bench not in names:
            continue
        data = results.get(bench)
        if not isinstance(data, dict) or "error" in data:
            rows.append({"bench": bench, "figure": label, "ours": "ERROR", "target": target,
                         "ts": ts, "result": "error"})
            continue
        value, text = _ours(data, path, unit)
        # Sustained: the noise of the full-length run reported, not of every probe.
        scope = data.get("sustained") if bench == "sustained" and data.get("sustained") else data
        if test is None or value is None:
            verdict = ""
        else:
            verdict = "pass" if test(value) else "MISS"
        rows.append({"bench": bench, "figure": label, "value": value, "ours": text, "target": target,
                     "ts": ts, "result": verdict, "noise": noise(scope)})
    return rows


def render(rows: list[dict]) -> str:
    head = ("bench", "figure", "ours (median [min-max])", "target", "TS/Bun", "result", "noise")
    cells = [head] + [(r["bench"], r["figure"], r["ours"], r["target"] or "-", r["ts"], r["result"],
                       r.get("noise", "-")) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    out = ["| bench | figure | ours: median [min-max] | target | TS on Bun | result | noise |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['bench']} | {r['figure'].strip()} | {r['ours']} | {r['target'] or '-'} | "
                   f"{r['ts']} | {r['result'] or '-'} | {r.get('noise', '-')} |")
    return "\n".join(out)


# -- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs, smaller sizes, 10 s sustained load")
    parser.add_argument("--only", nargs="+", choices=ORDER, metavar="NAME",
                        help=f"run only these ({', '.join(ORDER)})")
    parser.add_argument("--output", default=str(RESULTS), help="where to write the JSON results")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="before each benchmark wait up to SECONDS for both CPUs to be < 20%% busy "
                             "(a shared machine); the busy shares seen are recorded either way")
    parser.add_argument("--markdown", action="store_true",
                        help="run nothing: print the table of the results file as Markdown")
    args = parser.parse_args(argv)
    names = [n for n in ORDER if not args.only or n in args.only]
    if args.markdown:
        doc = json.loads(Path(args.output).read_text())
        print(markdown(table(doc["results"], [n for n in names if n in doc["results"]])))
        return 0

    started = time.time()
    info = machine_info()
    info["fsync_4k"] = fsync_probe()
    print(f"seed-agents bench ({'quick' if args.quick else 'full'}): {', '.join(names)}")
    print(f"python {info['python']}, nproc {info['nproc']}, {info['pinning']['note']}")
    g = info["git"]
    print(f"commit {g['commit'][:10]} {g['subject'][:60]!r}"
          + (f"; UNCOMMITTED server changes: {', '.join(g['uncommitted_server_changes'])}"
             if g["uncommitted_server_changes"] else ""))
    print(f"fsync of 4 KiB in {info['data_dir_root']}: p50 {info['fsync_4k']['p50_ms']} ms, "
          f"p99 {info['fsync_4k']['p99_ms']} ms; load average {loadavg()}")
    results: dict = {}
    timings: dict = {}
    for name in names:
        busy = wait_quiet(args.wait_quiet)
        git_now = git_state()   # others may commit to the same checkout while the bench runs
        t = time.time()
        la = loadavg()
        print(f"-- {name} ... (CPU busy before: {busy})", flush=True)
        try:
            results[name] = RUNNERS[name](args.quick)
        except Exception as exc:  # one failing benchmark must not lose the others
            traceback.print_exc()
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        timings[name] = {"seconds": round(time.time() - t, 1), "loadavg_before": la,
                         "loadavg_after": loadavg(), "cpu_busy_before": busy, "git": git_now}
        print(f"   {name}: {timings[name]['seconds']} s (load average before {la})", flush=True)
    _derive(results)
    rows = table(results, names)

    doc = {
        "quick": args.quick,
        "machine": info,
        "conditions": {
            "server": "python -m seed_agents.server.main on 127.0.0.1, a fresh data dir (database) per benchmark run",
            "server_flags": RAISED_LIMITS + RAISED_BOUNDS,
            "limits_note": "per-account limits raised so that they are not what is measured",
            "runs": "a warm-up, then 3 (quick) or 5 timed runs; figures are median, min and max over the runs",
        },
        "seconds": round(time.time() - started, 1),
        "timings": timings,
        "table": rows,
        "results": results,
    }
    out = Path(args.output)
    if args.only and out.exists():
        # Merge into the previous results of the same kind (quick or full), keeping the others.
        try:
            old = json.loads(out.read_text())
        except (OSError, ValueError):
            old = None
        if old and old.get("quick") == args.quick:
            old_results = old.get("results", {})
            old_results.update(results)
            old_timings = old.get("timings", {})
            old_timings.update(timings)
            doc["results"], doc["timings"] = old_results, old_timings
            doc["table"] = table(old_results, [n for n in ORDER if n in old_results])
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print()
    print(render(rows))
    print("noise: the share of the server's CPU / the load's CPU that other processes took during "
          "the timed phases (largest median); high values mean a shared machine disturbed the figure")
    print()
    print(f"wrote {out} ({doc['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

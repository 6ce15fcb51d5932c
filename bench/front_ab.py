"""The server's fronts before and after a change, in one run: GetSession over HTTP at 64
keep-alive connections, a v2 replay of 100,000 events, and RSS per idle subscribed socket.

    python -m bench.front_ab --tree before=/path/a --tree after=. [--tree after2=.] \\
        [--rounds 3] [--requests 5000] [--sockets 1000] [--json FILE]

Each tree runs as its own child server (`python -m seed_agents.server.main` of that tree, its own
code first on the path, pinned to the server CPU) on a copy of one data dir built once by this
tree's `bench.dbsetup`: one echo agent, a session of 20 events (the ~12.7 KB GetSession answer of
bench/rpc.py and bench/http.py) and one of 100,000 (bench/replay.py's). Naming the same tree
twice gives an A/A pair: the machine's noise, against which a difference means something.

Each round starts every tree's server afresh, in an order that rotates each round (drift falls
on all trees alike), and runs one load process (pinned to the load CPU; this tree's load code
for every tree) against it: a warm-up, then `--requests` GetSession at concurrency 64 over 64
keep-alive `POST /api/message` connections (closed loop: actions/s, p50, the server's CPU per
action from /proc), then a warm-up replay and one timed replay of the 100,000 events over a v2
socket (seconds to the last event, the RSS growth at its peak), then `--sockets` sockets each
subscribed to a small session, idle (RSS with them - RSS before, per socket). Reported: per tree
and figure the median over rounds, and each tree's median against the first tree's. Every phase
is bounded in count and time; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from seed_agents.clients.raw import now_ms

import bench.processes as processes
from bench import dbsetup
from bench.load import keypair
from bench.trees import medians_table
from bench.meters import CpuMeter, RssSampler, rss_kb
from bench.stats import latency_figures

LABEL = "front"
EVENT_CHARS = 400
REPLAY_EVENTS = 100_000


# -- the load (a child process of bench.processes.run_load) -------------------------------------
async def load(host: str, port: int, url: str, pid: int, session_20: str, session_100k: str,
               agent_id: str, requests: int, sockets: int) -> dict:
    from bench.http import KeepAlive, _closed_loop
    from bench.idle import load as idle_load
    from bench.replay import replay_once
    from bench.rpc import _actions, _sign

    kp = keypair(LABEL)
    out: dict = {}
    conns = [await KeepAlive.open(host, port) for _ in range(64)]
    counter = [0]
    ts = now_ms()
    warm = _sign(kp, _actions("GetSession", requests // 4, session_20, agent_id, counter), ts)
    await _closed_loop(conns, warm, timeout=120)
    bodies = _sign(kp, _actions("GetSession", requests, session_20, agent_id, counter), ts + requests // 9979 + 2)
    with CpuMeter(pid) as cpu:
        res = await _closed_loop(conns, bodies, timeout=180)
    for conn in conns:
        conn.close()
    done = len(res["latencies"])
    out["http_c64_actions_per_s"] = done / res["seconds"]
    out["http_c64_p50_ms"] = latency_figures(res["latencies"])["p50_ms"]
    out["http_c64_cpu_us_per_action"] = (cpu.result["main_busy"] + cpu.result["other_threads_busy"]) \
        * cpu.result["wall_s"] / max(1, done) * 1e6
    out["http_errors"] = res["errors"]

    await asyncio.sleep(0.5)
    before = rss_kb(pid)
    sampler = RssSampler(pid, 0.01).start()
    await replay_once(url, kp, session_100k, REPLAY_EVENTS)   # warm-up
    timed = await replay_once(url, kp, session_100k, REPLAY_EVENTS)
    sampler.stop()
    window = [kb for t, kb in sampler.samples if timed["t0"] <= t <= timed["t_end"] + 0.1]
    out["replay_100k_seconds"] = timed["seconds"]
    out["replay_100k_complete"] = timed["events"] == REPLAY_EVENTS
    out["replay_100k_rss_growth_mb"] = (max(window, default=before) - before) / 1024

    idle = await idle_load(url, "idle", pid, sockets, settle=1.0)
    out["idle_kb_per_socket"] = idle["per_socket_kb"]
    return out


# -- the runner -----------------------------------------------------------------------------------
class TreeServer(processes.Server):
    """bench.processes.Server, started from another source tree."""

    def __init__(self, tree: Path, label: str, data_dir: str) -> None:
        super().__init__(label, data_dir=data_dir)
        self.tree = tree

    def start(self, timeout: float = 240.0) -> "TreeServer":   # a loaded machine starts slowly
        saved = processes.ROOT
        processes.ROOT = self.tree   # its PYTHONPATH and working directory
        try:
            super().start(timeout)
        finally:
            processes.ROOT = saved
        return self


FIGURES = (("http_c64_actions_per_s", "HTTP GetSession c64 actions/s", "/s"),
           ("http_c64_p50_ms", "HTTP GetSession c64 p50", "ms"),
           ("http_c64_cpu_us_per_action", "HTTP GetSession c64 server CPU per action", "us"),
           ("replay_100k_seconds", "v2 replay of 100,000 events: time to last event", "s"),
           ("replay_100k_rss_growth_mb", "v2 replay of 100,000 events: RSS growth at peak", "MB"),
           ("idle_kb_per_socket", "RSS per idle subscribed socket", "KB"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.front_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--sockets", type=int, default=1000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    kp = keypair(LABEL)
    base = tempfile.mkdtemp(prefix="bench-front-")
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    try:
        seed_dir = str(Path(base) / "seed")
        built = dbsetup.build(seed_dir, kp.account_id, {"get": (20, EVENT_CHARS),
                                                        "replay": (REPLAY_EVENTS, EVENT_CHARS)})
        print(f"data built in {built['seconds']:.1f} s", flush=True)
        for r in range(args.rounds):
            order = trees[r % len(trees):] + trees[:r % len(trees)]
            for name, tree in order:
                data_dir = str(Path(base) / f"{name}-{r}")
                shutil.copytree(seed_dir, data_dir)
                started = time.monotonic()
                with TreeServer(tree, f"front-{name}", data_dir) as srv:
                    row = processes.run_load("bench.front_ab:load", {
                        "host": "127.0.0.1", "port": srv.port, "url": srv.url, "pid": srv.pid,
                        "session_20": built["sessions"]["get"], "session_100k": built["sessions"]["replay"],
                        "agent_id": built["agentId"], "requests": args.requests, "sockets": args.sockets},
                        timeout=900)
                shutil.rmtree(data_dir, ignore_errors=True)
                results[name].append(row)
                print(f"round {r} {name}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items()
                                                        if isinstance(v, float))
                      + f" ({time.monotonic() - started:.0f} s)", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(medians_table(trees, results, FIGURES))
    if args.json:
        Path(args.json).write_text(json.dumps({"trees": {n: str(p) for n, p in trees}, "rounds": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

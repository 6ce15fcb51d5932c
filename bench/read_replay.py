"""What crash-safe reads cost (docs/protocol.md, "Replay").

    .venv/bin/python -m bench.read_replay [--quick] [--before DIR] [--rounds N]

GetSession (20-event session, as bench/rpc.py) at concurrency 1 and 64, over v2, with reads
signed at the server's time (the usual case: nothing is written before the answer) and signed
2 s ahead of it (a client whose clock runs fast: the read's claim is committed, one fsync shared
by a group, before the answer). `--before DIR` runs the same load, interleaved in the same run,
against the server code of another tree (e.g. an export of the commit before the change), so the
ratios compare like with like. Prints JSON; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from seed_agents.clients.raw import now_ms

from bench import dbsetup, processes
from bench.load import Rpc, closed_loop, keypair
from bench.processes import Server, run_load
from bench.stats import latency_figures

EVENT_CHARS = 400
VARIANTS = {"at_clock": 0, "ahead_2s": 2_000}


def _frames(kp, session_id: str, n: int, offset_ms: int, counter: list[int]) -> list[bytes]:
    from seed_agents.protocol.wire.envelope import sign_envelope

    ts = now_ms() + offset_ms
    out = []
    for _ in range(n):
        i = counter[0]
        counter[0] += 1
        # distinct bytes per request: the limit varies (>= 21 keeps every answer the same 20 events)
        out.append(sign_envelope(kp, {"_": "GetSession", "sessionId": session_id,
                                      "limit": 21 + i % 9979}, ts=ts + i // 9979))
    return out


async def load(url: str, label: str, session_id: str, quick: bool) -> dict:
    kp = keypair(label)
    n = {1: 300, 64: 1500} if quick else {1: 1000, 64: 5000}
    counter = [0]
    out = {}
    for c in (1, 64):
        sockets = [await Rpc.open(url) for _ in range(min(c, 16))]
        for s in sockets:
            await s.call(kp, {"_": "ListModelProviders"})
        for variant, offset in VARIANTS.items():
            await closed_loop(sockets, _frames(kp, session_id, n[c] // 4, offset, counter), c)
            res = await closed_loop(sockets, _frames(kp, session_id, n[c], offset, counter), c)
            lat = latency_figures(res["latencies"])
            out[f"{variant}_c{c}"] = {"actions_per_s": round(len(res["latencies"]) / res["seconds"], 1),
                                      "p50_ms": lat["p50_ms"], "p99_ms": lat["p99_ms"],
                                      "errors": res["errors"], "first_error": res["first_error"]}
        for s in sockets:
            await s.close()
    return out


def _one(root: Path, data_dir: str, params: dict) -> dict:
    saved = processes.ROOT
    processes.ROOT = root   # the server's code (cwd and PYTHONPATH); the load is always ours
    try:
        with Server("read-replay", data_dir=data_dir) as srv:
            processes.ROOT = saved
            return run_load("bench.read_replay:load", {"url": srv.url, **params}, timeout=600)
    finally:
        processes.ROOT = saved


def run(quick: bool = False, before: str | None = None, rounds: int = 2) -> dict:
    label = "read-replay"
    kp = keypair(label)
    data_dir = tempfile.mkdtemp(prefix="bench-read-replay-")
    trees = {"after": processes.ROOT} | ({"before": Path(before).resolve()} if before else {})
    try:
        built = dbsetup.build(data_dir, kp.account_id, {"get": (20, EVENT_CHARS)})
        params = {"label": label, "session_id": built["sessions"]["get"], "quick": quick}
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(rounds):   # interleaved, so drift of the machine hits both alike
            for name, root in trees.items():
                runs[name].append(_one(root, data_dir, params))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    best = {name: {key: max((r[key] for r in rs), key=lambda x: x["actions_per_s"])
                   for key in rs[0]} for name, rs in runs.items()}
    out: dict = {"best_of": rounds, "figures": best}
    after = best["after"]
    out["ahead_over_at_clock"] = {f"c{c}": round(after[f"ahead_2s_c{c}"]["actions_per_s"]
                                                 / after[f"at_clock_c{c}"]["actions_per_s"], 3)
                                  for c in (1, 64)}
    if "before" in best:
        out["after_over_before"] = {key: round(after[key]["actions_per_s"]
                                               / best["before"][key]["actions_per_s"], 3)
                                    for key in after}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read_replay")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--before", help="a tree with the server code to compare against")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (best of)")
    args = parser.parse_args()
    print(json.dumps(run(args.quick, args.before, args.rounds), indent=2))


if __name__ == "__main__":
    main()

"""Where a turn's time goes on the server: MessageSession turns one at a time (as bench/turns.py
drives them: the send, then the durable assistant append on a socket subscribed to the
session), against a server started with `--turn-timings true` (server/operations/turn_timing.py),
with the fake OpenAI-compatible provider on loopback (answering at once, streamed) and with the
built-in echo provider.

    python -m bench.turn_phases [--quick] [--turns N] [--before REF [--rounds R]] [--json FILE]

Printed per provider: each phase's mean, p50 and p99 over the timed turns (the server's
histograms read before and after them, so the warm-up does not count; quantiles from buckets
1.25x apart), the turn's own time on the server (all but the provider's stream), and the
client's end-to-end p50 and p99 for comparison, and the event loop thread's CPU time in each
phase (the wall time less the waits for the database writer, the provider and the machine). The server's own time is set against the
reference TypeScript server's turn end to end (issue 39: p50 7.5 ms, p99 17.4 ms, the fake
provider's streaming included, which makes the ratio flatter to the reference, not to us).
With `--before REF` a server of that tree (it must have `--turn-timings`) runs beside this
one, and the turns are sent in R rounds (default 6), the trees taking turns going first, each
round's histograms added up per tree: before and after from one run, the machine's drift falling
on both. Bounded: every turn waits at most 30 s, each load process 600 s.

Where the wall time goes to fsync: `--tmpfs` puts the servers' data dirs on /dev/shm, where
fsync costs nothing (labelled so in the output; a bench figure only, never a way to run the
server: durability is synchronous=FULL on a real disk), and `--disk-vs-tmpfs` runs this tree
twice in interleaved rounds, on disk ("before") and on tmpfs ("after"), so the difference in one
run is the disk's commits.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import urllib.request

import tempfile
from pathlib import Path

from bench.bench_bounds import extract
from bench.load import Rpc, keypair
from bench.processes import FakeProvider, Server, run_load
from bench.turns import _session_socket, _turns

PHASES = ("accept", "queue", "prepare", "provider", "finish", "publish", "own", "total")
REFERENCE_TURN_MS = {"p50": 7.5, "p99": 17.4}
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None   # tmpfs: where fsync costs nothing   # issue 39's table, the reference server
_LINE = re.compile(r'^seed_agents_turn_phase_(seconds|loop_cpu_seconds)_(bucket|count|sum)\{(.*?)\} (\S+)$', re.M)


def scrape(metrics_url: str) -> dict:
    """{"wall" | "cpu": {phase: {"count": n, "sum": s, "buckets": [(le, cumulative count)]}}} from
    /metrics: the phases' wall times, and the event loop thread's CPU in each."""
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        text = r.read().decode()
    out: dict = {"wall": {}, "cpu": {}}
    for metric, kind, labels, value in _LINE.findall(text):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        entry = out["wall" if metric == "seconds" else "cpu"].setdefault(
            fields["phase"], {"count": 0.0, "sum": 0.0, "buckets": []})
        if kind == "bucket":
            entry["buckets"].append((float(fields["le"]), float(value)))
        else:
            entry[kind] = float(value)
    return out


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The q-quantile (0..1) of a cumulative histogram, linear within its bucket."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if le == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 0.0)
        lower, below = le, cumulative
    return lower


def raw_delta(before: dict, after: dict) -> dict:
    """Per phase: the histogram of what happened between two scrapes (count, sum, buckets)."""
    out = {}
    for phase, a in after.items():
        b = before.get(phase, {"count": 0.0, "sum": 0.0, "buckets": []})
        earlier = dict(b["buckets"])
        out[phase] = {"count": a["count"] - b["count"], "sum": a["sum"] - b["sum"],
                      "buckets": [(le, n - earlier.get(le, 0.0)) for le, n in sorted(a["buckets"])]}
    return out


def add(total: dict, more: dict) -> dict:
    """Two phase histograms added up (rounds of one tree)."""
    for phase, m in more.items():
        t = total.setdefault(phase, {"count": 0.0, "sum": 0.0, "buckets": [(le, 0.0) for le, _ in m["buckets"]]})
        t["count"] += m["count"]
        t["sum"] += m["sum"]
        t["buckets"] = [(le, n + k) for (le, n), (_, k) in zip(t["buckets"], m["buckets"])]
    return total


def figures(hist: dict) -> dict:
    """Per phase: count, mean, p50 and p99 (seconds) of a phase histogram."""
    out = {}
    for phase in PHASES:
        h = hist.get(phase)
        if h is None:
            continue
        count = h["count"]
        out[phase] = {"count": int(count), "mean_s": h["sum"] / count if count else float("nan"),
                      "p50_s": quantile(h["buckets"], 0.50), "p99_s": quantile(h["buckets"], 0.99)}
    return out


def delta(before: dict, after: dict) -> dict:
    return figures(raw_delta(before, after))


async def load(url: str, metrics_url: str, label: str, provider: str, fake_url: str | None, turns: int,
               raw: bool = False) -> dict:
    kp = keypair(label)
    admin = await Rpc.open(url)
    if provider == "fake":
        await admin.call(kp, {"_": "SetModelProvider", "name": "fake",
                              "provider": {"type": "custom", "baseUrl": fake_url}})
        definition = {"name": "fake", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}
    else:
        definition = {"name": "echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}
    agent_id = (await admin.call(kp, {"_": "CreateAgent", "definition": definition}))["agentId"]
    rpc, session_id, arrivals = await _session_socket(url, kp, agent_id)
    await _turns(rpc, kp, session_id, arrivals, max(10, turns // 4), f"{provider}-warm")   # warm-up
    before = await asyncio.to_thread(scrape, metrics_url)
    client = await _turns(rpc, kp, session_id, arrivals, turns, f"{provider}-timed")
    after = await asyncio.to_thread(scrape, metrics_url)
    await rpc.close()
    await admin.close()
    if raw:   # (rounds of an A/B: added up by the caller)
        return {"client_turn_s": client["latencies"], "wall": raw_delta(before["wall"], after["wall"]),
                "cpu": raw_delta(before["cpu"], after["cpu"])}
    return {"provider": provider, "turns": turns, "client": client, "phases": delta(before["wall"], after["wall"]),
            "loop_cpu": delta(before["cpu"], after["cpu"])}


def run_ab(before_ref: str | None, quick: bool, turns: int | None, rounds: int,
           tmpfs: tuple[bool, bool] = (False, False)) -> dict:
    """Both trees' servers side by side, R interleaved rounds per provider; per tree and provider
    the phases over all rounds. `before_ref` None: this tree on both sides (with `tmpfs`, which
    side keeps its data dir on /dev/shm: the disk against tmpfs, the fsyncs' share)."""
    from bench.sqlite_ab import TreeServer
    from bench.stats import latency_figures

    turns = turns or (100 if quick else 300)
    per_round = max(10, turns // rounds)
    out: dict = {}
    this_tree = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=SHM) as shm, \
            FakeProvider("plain") as fake:
        trees = {"before": extract(before_ref, Path(tmp) / "before") if before_ref else this_tree,
                 "after": this_tree}
        servers = {}
        try:
            for (name, tree), on_tmpfs in zip(trees.items(), tmpfs):
                data = Path(shm if on_tmpfs else tmp) / f"data-{name}"
                data.mkdir()
                srv = TreeServer(name, tree, data, None)
                srv.cmd += ["--turn-timings", "true", "--hm-server-url", ""]
                servers[name] = srv.start()
            for provider in ("fake", "echo"):
                hists: dict = {name: {"wall": {}, "cpu": {}, "client": []} for name in trees}
                for r in range(rounds):
                    for name in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                        srv = servers[name]
                        try:
                            res = run_load("bench.turn_phases:load", {
                                "url": srv.url, "metrics_url": f"http://127.0.0.1:{srv.port}/metrics",
                                "label": f"turn-phases-{provider}-{name}-{r}", "provider": provider,
                                "fake_url": fake.base_url, "turns": per_round, "raw": True}, timeout=600)
                        except Exception:
                            print(f"the load on the {name} tree failed; its server's log ends:\n{srv.log_tail()}")
                            raise
                        add(hists[name]["wall"], res["wall"])
                        add(hists[name]["cpu"], res["cpu"])
                        hists[name]["client"] += res["client_turn_s"]
                    print(f"{provider}: round {r + 1}/{rounds}", flush=True)
                out[provider] = {name: {"provider": provider, "turns": per_round * rounds,
                                        "client": {"turn": latency_figures(h["client"])},
                                        "phases": figures(h["wall"]), "loop_cpu": figures(h["cpu"])}
                                 for name, h in hists.items()}
        finally:
            for srv in servers.values():
                srv.stop()
    return out


def ab_report(result: dict) -> str:
    lines = []
    for provider, trees in result.items():
        b, a = trees["before"], trees["after"]
        lines += [f"\n{provider} provider, {a['turns']} turns per tree, one at a time "
                  f"(client end to end p50: before {b['client']['turn']['p50_ms']:.2f} ms, "
                  f"after {a['client']['turn']['p50_ms']:.2f} ms)",
                  "| phase | before p50 | after p50 | after / before (p50) | before mean | after mean "
                  "| loop CPU before / after (mean) |", "|---|---|---|---|---|---|---|"]
        for phase in PHASES:
            pb, pa = b["phases"].get(phase), a["phases"].get(phase)
            if pb is None or pa is None:
                continue
            cb, ca = b["loop_cpu"].get(phase), a["loop_cpu"].get(phase)
            cpu = f"{cb['mean_s'] * 1e6:,.0f} / {ca['mean_s'] * 1e6:,.0f} us" if cb and ca else "-"
            lines.append(f"| {phase} | {pb['p50_s'] * 1e6:,.0f} us | {pa['p50_s'] * 1e6:,.0f} us | "
                         f"{pa['p50_s'] / pb['p50_s']:.2f} | {pb['mean_s'] * 1e6:,.0f} us | "
                         f"{pa['mean_s'] * 1e6:,.0f} us | {cpu} |")
        own = {name: trees[name]["phases"].get("own") for name in ("before", "after")}
        if own["before"] and own["after"]:
            lines.append("own time per turn / the reference's turn (p50, p99): " + ", ".join(
                f"{name} {o['p50_s'] * 1e3 / REFERENCE_TURN_MS['p50']:.2f}, {o['p99_s'] * 1e3 / REFERENCE_TURN_MS['p99']:.2f}"
                for name, o in own.items()) + " (goal: <= 0.5)")
    return "\n".join(lines)


def run(quick: bool = False, turns: int | None = None, tmpfs: bool = False) -> dict:
    turns = turns or (100 if quick else 300)
    with contextlib.ExitStack() as stack:
        data_dir = stack.enter_context(tempfile.TemporaryDirectory(dir=SHM)) if tmpfs else None
        return _run(turns, data_dir)


def _run(turns: int, data_dir: str | None) -> dict:
    out = {}
    with FakeProvider("plain") as fake, Server("turn-phases", extra=["--turn-timings", "true"],
                                               data_dir=data_dir) as srv:
        metrics_url = srv.url.replace("ws://", "http://").split("/agents")[0] + "/metrics"
        for provider in ("fake", "echo"):
            out[provider] = run_load("bench.turn_phases:load", {
                "url": srv.url, "metrics_url": metrics_url, "label": f"turn-phases-{provider}",
                "provider": provider, "fake_url": fake.base_url, "turns": turns}, timeout=600)
    return out


def report(result: dict) -> str:
    lines = []
    for provider, res in result.items():
        phases, client = res["phases"], res["client"]["turn"]
        own = phases.get("own", {})
        lines += [f"\n{provider} provider, {res['turns']} turns one at a time "
                  f"(client end to end: p50 {client['p50_ms']:.2f} ms, p99 {client['p99_ms']:.2f} ms)",
                  "| phase | mean | p50 | p99 | share of the mean turn | the event loop's CPU in it (mean) |",
                  "|---|---|---|---|---|---|"]
        total = phases.get("total", {}).get("mean_s", float("nan"))
        for phase in PHASES:
            p = phases.get(phase)
            if p is None:
                continue
            cpu = res.get("loop_cpu", {}).get(phase)
            lines.append(f"| {phase} | {p['mean_s'] * 1e6:,.0f} us | {p['p50_s'] * 1e6:,.0f} us | "
                         f"{p['p99_s'] * 1e6:,.0f} us | {p['mean_s'] / total:.0%} | "
                         + (f"{cpu['mean_s'] * 1e6:,.0f} us |" if cpu else "- |"))
        if own:
            lines.append(f"own time per turn / the reference's turn: p50 {own['p50_s'] * 1e3 / REFERENCE_TURN_MS['p50']:.2f}"
                         f", p99 {own['p99_s'] * 1e3 / REFERENCE_TURN_MS['p99']:.2f} (goal: <= 0.5)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 timed turns per provider (default 300)")
    parser.add_argument("--turns", type=int, default=None, help="timed turns per provider")
    parser.add_argument("--json", metavar="FILE", default=None, help="also write the result to FILE")
    parser.add_argument("--before", metavar="REF", default=None, help="a tree to run beside this one (A/B)")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds of an A/B (default 6)")
    parser.add_argument("--tmpfs", action="store_true",
                        help="the servers' data dirs on /dev/shm: fsync costs nothing there (a bench figure only; "
                             "the server is never run so)")
    parser.add_argument("--disk-vs-tmpfs", action="store_true",
                        help="this tree twice, interleaved: data dir on disk ('before') and on tmpfs ('after')")
    args = parser.parse_args()
    if args.disk_vs_tmpfs:
        result = run_ab(None, args.quick, args.turns, max(1, args.rounds), tmpfs=(False, True))
        print("before = this tree, data dir on disk; after = this tree, data dir on tmpfs (no fsync cost)")
        print(ab_report(result))
    elif args.before:
        result = run_ab(args.before, args.quick, args.turns, max(1, args.rounds), tmpfs=(args.tmpfs, args.tmpfs))
        print(ab_report(result))
    else:
        result = run(args.quick, args.turns, args.tmpfs)
        print(("data dir on tmpfs (no fsync cost; a bench figure only)" if args.tmpfs else "") + report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

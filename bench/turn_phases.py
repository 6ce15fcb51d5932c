"""Where a turn's time goes on the server: MessageSession turns one at a time (as bench/turns.py
drives them: the send, then the durable assistant append on a socket subscribed to the
session), against a server started with `--turn-timings true` (server/operations/turn_timing.py),
with the fake OpenAI-compatible provider on loopback (answering at once, streamed) and with the
built-in echo provider.

    python -m bench.turn_phases [--quick] [--turns N] [--json FILE]

Printed per provider: each phase's mean, p50 and p99 over the timed turns (the server's
histograms read before and after them, so the warm-up does not count; quantiles from buckets
1.25x apart), the turn's own time on the server (all but the provider's stream), and the
client's end-to-end p50 and p99 for comparison, and the event loop thread's CPU time in each
phase (the wall time less the waits for the database writer, the provider and the machine). The server's own time is set against the
reference TypeScript server's turn end to end (issue 39: p50 7.5 ms, p99 17.4 ms, the fake
provider's streaming included, which makes the ratio flatter to the reference, not to us).
Bounded: every turn waits at most 30 s, the whole load process 600 s.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import urllib.request

from bench.load import Rpc, keypair
from bench.processes import FakeProvider, Server, run_load
from bench.turns import _session_socket, _turns

PHASES = ("accept", "queue", "prepare", "provider", "finish", "publish", "own", "total")
REFERENCE_TURN_MS = {"p50": 7.5, "p99": 17.4}   # issue 39's table, the reference server
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


def delta(before: dict, after: dict) -> dict:
    """Per phase: count, mean, p50 and p99 (seconds) of what happened between two scrapes."""
    out = {}
    for phase in PHASES:
        a, b = after.get(phase), before.get(phase, {"count": 0.0, "sum": 0.0, "buckets": []})
        if a is None:
            continue
        earlier = dict(b["buckets"])
        buckets = [(le, n - earlier.get(le, 0.0)) for le, n in sorted(a["buckets"])]
        count = a["count"] - b["count"]
        out[phase] = {"count": int(count), "mean_s": (a["sum"] - b["sum"]) / count if count else float("nan"),
                      "p50_s": quantile(buckets, 0.50), "p99_s": quantile(buckets, 0.99)}
    return out


async def load(url: str, metrics_url: str, label: str, provider: str, fake_url: str | None, turns: int) -> dict:
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
    return {"provider": provider, "turns": turns, "client": client, "phases": delta(before["wall"], after["wall"]),
            "loop_cpu": delta(before["cpu"], after["cpu"])}


def run(quick: bool = False, turns: int | None = None) -> dict:
    turns = turns or (100 if quick else 300)
    out = {}
    with FakeProvider("plain") as fake, Server("turn-phases", extra=["--turn-timings", "true"]) as srv:
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
    args = parser.parse_args()
    result = run(args.quick, args.turns)
    print(report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

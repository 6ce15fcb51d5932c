"""Reads off the loop (issue 39) before and after a change, on SQLite and on PostgreSQL, in one run:
GetSession at concurrency 64 over keep-alive HTTP and over v2, Subscribe to an agent's key at
concurrency 16 over v2 (the access check, the grants' note, the current AgentInfo), and
sequential echo turns.

    python -m bench.reads_ab --before DIR [--rounds 2] [--quick] [--json FILE]

DIR is another source tree (e.g. `git archive` of main before the change); this tree is "after".
Rounds are interleaved before, after, after, before, ... (drift falls on both alike), and the two
runs of one tree are its A/A: a difference between trees means something only beyond the spread
of a tree against itself. Each run starts each storage's server afresh (pinned to the server
CPU; the load to the load CPU, bench.conditions) on a fresh store filled by
bench.cluster.prepared (one echo agent, a 20-event session), PostgreSQL in a schema of its own
(dropped after). Every loop is bounded in count and time; nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from seed_agents.clients.raw import now_ms

from bench.cluster import PG_URL_ENV, PgSchema, _cell, _loopback_only, _nothing, prepared
from bench.conditions import git_state, machine_info
from bench.load import Rpc, closed_loop, keypair
from bench.processes import Server
from bench.rpc import _actions, _sign
from bench.stats import latency_figures, summary

LABEL = "reads-ab"
RUN_SECONDS = 6.0   # at most about this long per timed run (signed envelopes age: 30 s window)


def sizes(quick: bool) -> dict:
    return {"runs": 2 if quick else 3, "requests": 1500 if quick else 4000, "turns": 20 if quick else 40}


# -- load processes ------------------------------------------------------------------------------
async def v2_load(url: str, label: str, kind: str, target: str, concurrency: int, runs: int,
                  requests: int) -> dict:
    """`kind` over 16 v2 sockets (or fewer), `concurrency` outstanding: GetSession of session
    `target`, or Subscribe to key `target` (each frame signed with a ts of its own)."""
    from seed_agents.protocol.wire.envelope import sign_envelope

    kp = keypair(label)
    sockets = [await Rpc.open(url, on_event=lambda frame: None) for _ in range(min(concurrency, 16))]
    for s in sockets:   # bound to the account before anything is timed
        await s.call(kp, {"_": "ListModelProviders"})
    counter, rates, lat, errors, first_error = [0], [], [], 0, None
    n, last_ts = requests // 4, 0
    for r in range(runs + 1):
        ts = max(now_ms(), last_ts + 2)
        if kind == "GetSession":
            frames = _sign(kp, _actions("GetSession", n, target, "", counter), ts)
            last_ts = ts + n // 9979 + 1
        else:
            frames = [sign_envelope(kp, {"_": "Subscribe", "key": target}, ts=ts + i) for i in range(n)]
            last_ts = ts + n
        res = await closed_loop(sockets, frames, concurrency, timeout=120)
        if r == 0:   # the warm-up sets the run's size: about RUN_SECONDS at its rate
            rate = len(res["latencies"]) / res["seconds"]
            n = max(concurrency * 4, min(requests, int(rate * RUN_SECONDS)))
            if kind == "Subscribe":
                n = min(n, 20_000)   # one ts per frame: they must stay inside the clock window
            continue
        rates.append(len(res["latencies"]) / res["seconds"])
        lat.append(latency_figures(res["latencies"]))
        errors += res["errors"]
        first_error = first_error or res["first_error"]
    for s in sockets:
        await s.close()
    return {"actions_per_s": summary(rates, 1), "requests_per_run": n,
            "p50_ms": summary([x["p50_ms"] for x in lat]), "p99_ms": summary([x["p99_ms"] for x in lat]),
            "errors": errors, "first_error": first_error}


# -- one run: each storage, every cell ------------------------------------------------------------
def one_run(pg_url: str, quick: bool, storages=("sqlite", "postgresql"), only=None) -> dict:  # noqa: ANN001
    size = sizes(quick)
    out: dict = {}
    for backend in storages:
        label = f"{LABEL}-{backend}"
        kp = keypair(label)
        data_dir = tempfile.mkdtemp(prefix=f"bench-reads-{backend}-")
        with (PgSchema(pg_url) if backend == "postgresql" else _nothing()) as schema:
            url = schema.url if schema else None
            built = prepared(backend, url, data_dir, kp.account_id, {"get": 20})
            extra = ["--storage-url", url] if url else []
            with Server(label, data_dir=data_dir, extra=extra) as srv:
                session_id, agent_id = built["sessions"]["get"], built["agentId"]
                common = {"label": label, "runs": size["runs"], "requests": size["requests"]}
                cells = {
                    "GetSession_http_c64": ("bench.cluster:http_load", {
                        **common, "ports": [srv.port], "kind": "GetSession", "session_id": session_id,
                        "agent_id": agent_id, "concurrency": 64}),
                    "GetSession_v2_c64": ("bench.reads_ab:v2_load", {
                        **common, "url": srv.url, "kind": "GetSession", "target": session_id, "concurrency": 64}),
                    "Subscribe_v2_c16": ("bench.reads_ab:v2_load", {
                        **common, "url": srv.url, "kind": "Subscribe", "target": "agents/" + agent_id,
                        "concurrency": 16}),
                    "turns": ("bench.cluster:turns_load", {
                        "label": label, "url": srv.url, "agent_id": agent_id, "runs": size["runs"],
                        "turns": size["turns"]}),
                }
                out[backend] = {name: _cell(*cell) for name, cell in cells.items() if not only or name in only}
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


CELLS = (("GetSession_http_c64", "actions_per_s", "GetSession HTTP c64 /s"),
         ("GetSession_v2_c64", "actions_per_s", "GetSession v2 c64 /s"),
         ("Subscribe_v2_c16", "actions_per_s", "Subscribe agents/ v2 c16 /s"),
         ("turns", "turns_per_s_at_p50", "echo turns /s at p50"))


def _median(run: dict, backend: str, cell: str, key: str) -> float | None:
    try:
        return run[backend][cell][key]["median"]
    except (KeyError, TypeError):
        return None


def table(runs: dict[str, list[dict]]) -> str:
    """Per storage and figure: each run of each tree, the tree's median, the A/A spread (a tree's
    runs against each other: max/min) and after/before."""
    rows = ["| storage | figure | before runs | after runs | before A/A | after A/A | after/before |",
            "|---|---|---|---|---|---|---|"]
    for backend in ("sqlite", "postgresql"):
        for cell, key, title in CELLS:
            vals = {tree: [v for r in rs if backend in r if (v := _median(r, backend, cell, key)) is not None]
                    for tree, rs in runs.items()}
            if not vals["before"] or not vals["after"] or not all(vals["before"] + vals["after"]):
                continue
            med = {t: statistics.median(v) for t, v in vals.items()}
            spread = {t: max(v) / min(v) if min(v) else float("nan") for t, v in vals.items()}
            rows.append(f"| {backend} | {title} | {', '.join(f'{v:.0f}' for v in vals['before'])} | "
                        f"{', '.join(f'{v:.0f}' for v in vals['after'])} | {spread['before']:.3f} | "
                        f"{spread['after']:.3f} | {med['after'] / med['before']:.3f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reads_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, metavar="DIR", help="the tree before the change")
    parser.add_argument("--url", default=os.environ.get(PG_URL_ENV, ""),
                        help=f"PostgreSQL URL (default: ${PG_URL_ENV}); loopback only")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs per tree")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--storages", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument("--only", default="", help="comma-separated cells (default: all): "
                        + ", ".join(cell for cell, _k, _t in CELLS))
    args = parser.parse_args(argv)
    if not args.url:
        parser.error(f"no PostgreSQL URL: pass --url or set {PG_URL_ENV}")
    _loopback_only(args.url)
    order: list[str] = []
    for r in range(args.rounds):
        order += [("before", "after"), ("after", "before")][r % 2]
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    loads = []
    for tree in order:
        if tree == "before":
            os.environ["BENCH_SERVER_TREE"] = os.path.abspath(args.before)
        try:
            load0 = os.getloadavg()[0]
            runs[tree].append(one_run(args.url, args.quick, tuple(args.storages.split(",")),
                                      {c for c in args.only.split(",") if c}))
            loads.append((tree, round(load0, 1), round(os.getloadavg()[0], 1)))
        finally:
            os.environ.pop("BENCH_SERVER_TREE", None)
        print(f"{tree} done (load {loads[-1][1]} -> {loads[-1][2]})", file=sys.stderr, flush=True)
    result = {"machine": machine_info(), "git": git_state(), "order": order, "loadavg": loads, "runs": runs}
    text = table(runs)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**result, "table": text}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

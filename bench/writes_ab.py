"""The HTTP write path before and after a change, in one run, with an A/A pair beside it:

    python -m bench.writes_ab [--before REF] [--after REF|.] [--no-aa] [--rounds N] [--quick]
                              [--cells ...] [--wait-quiet S] [--profile DIR] [--json FILE]

What the Seed desktop sends for a write: keep-alive `POST /api/message` with a signed CBOR
envelope. Cells, each at concurrency 8 and 64 (that many keep-alive connections, one request
at a time each, closed loop, a minimal raw client: bench.http.KeepAlive):

- `CreateSession cN`: CreateSession of the seeded echo agent, each with its own clientRequestId
  (so every one is a new session, a new idempotency row and a claimed signature);
- `MessageSession cN`: one session per connection (made before timing), MessageSession to it
  with a clientMessageId; timed to the answer, i.e. the *accept*: the user event and the queued
  run durable. The echo turn each message starts runs after the answer; after every timed chunk
  the load waits (bounded) until the server's CPU is idle again, so one tree's turns never run
  during another tree's chunk, and the CPU per message counts the turn too (`cpu_us` here is
  accept + turn; throughput and latency are the accept's).

Trees: `before` (`--before`, a git ref extracted with `git archive`), `after` (`--after`, `.`
is this working tree as it is), and, unless `--no-aa`, `before2`: the before tree again as its
own server, the A/A pair whose ratio shows the noise of the machine. Every server is pinned to
the server CPU on a data dir seeded by its own tree's `bench.dbsetup`; the load (one process a
round, pinned to the load CPU) sends to them chunk by chunk in an order that rotates per chunk
and per round, so drift falls on all alike. Raw Ed25519 verify of the same CreateSession signing
input is measured on the server CPU in each round while the servers idle: each throughput is
also given as its ratio to it (the issue's target: CreateSession >= 0.30 of raw verify).

Figures per tree and cell: actions/s, its ratio to raw verify, p50, p99, the server's CPU per
action (all threads, /proc schedstat), the writer thread's CPU and write calls per action, and
the write jobs a commit carried (from /metrics, when the tree has it; 0 otherwise). Reported: medians over rounds, and per-round ratios
after/before and before2/before as their geometric mean with a 95% interval. Every phase is
bounded in count and time (CELL_CAP_S); nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.conditions import SERVER_CPU, machine_info
from bench.processes import run_load
from bench.sqlite_ab import (TreeServer, _per_action, _spread, _thread_deltas, _Window, db_counters,
                             geomean_ci, resolve, seed, server_cpu_ns, thread_counters)

LABEL = "writes-ab"
CELLS = ("CreateSession c8", "CreateSession c64", "MessageSession c8", "MessageSession c64")
CELL_CAP_S = 60.0     # no timed chunk runs longer than this
IDLE_CAP_S = 30.0     # nor does waiting for a tree's turns to end
CHUNKS = 3            # timed chunks per tree, cell and round
# Turns queue per session without a bound of their own here; the per-account cap of runs in
# flight would answer 429 (measured elsewhere, bench/deep_queue.py).
EXTRA_FLAGS = ["--max-runs-in-flight", "1000000", "--max-connections-per-address", "100000"]


def sizes(quick: bool) -> tuple[int, dict[str, int]]:
    """(rounds, requests per tree, cell and round; split into CHUNKS chunks)."""
    if quick:
        return 3, {"CreateSession c8": 900, "CreateSession c64": 1500,
                   "MessageSession c8": 450, "MessageSession c64": 900}
    return 6, {"CreateSession c8": 1800, "CreateSession c64": 3000,
               "MessageSession c8": 900, "MessageSession c64": 1800}


class Server(TreeServer):
    """bench.sqlite_ab's tree server, with the run cap raised and many connections per address."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.cmd += EXTRA_FLAGS


# -- the load (a load process per round, bench.processes.run_load) --------------------------------

def _sign(kp, actions: list[dict]) -> list[bytes]:
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    return [sign_envelope(kp, a, ts=unique_ts()) for a in actions]


async def _lanes(conns: list, per_conn: list[list[bytes]]) -> dict:
    """Each connection posts its own bodies one at a time (closed loop)."""
    latencies: list[float] = []
    errors = [0]
    first_error: list = [None]
    deadline = time.perf_counter() + CELL_CAP_S

    async def lane(conn, bodies) -> None:
        for body in bodies:
            if time.perf_counter() > deadline:
                return
            t0 = time.perf_counter()
            status, answer = await asyncio.wait_for(conn.post(body), 30)
            latencies.append(time.perf_counter() - t0)
            if status != 200 or answer[:40].find(b"Error") >= 0:
                errors[0] += 1
                if first_error[0] is None:
                    from seed_agents.protocol.wire.dagcbor import decode
                    first_error[0] = f"{status} {decode(answer)!r}"[:300]

    started = time.perf_counter()
    await asyncio.gather(*(lane(c, b) for c, b in zip(conns, per_conn)))
    return {"latencies": latencies, "seconds": time.perf_counter() - started, "errors": errors[0],
            "first_error": first_error[0]}


async def wait_idle(pid: int, cap: float = IDLE_CAP_S) -> float:
    """Until the server used under 2 ms of CPU in 50 ms (its turns are done); the seconds waited."""
    started = time.monotonic()
    last = server_cpu_ns(pid)
    while time.monotonic() - started < cap:
        await asyncio.sleep(0.05)
        now = server_cpu_ns(pid)
        if now - last < 2_000_000:
            break
        last = now
    return time.monotonic() - started


class Writes:
    """One cell on one tree: `c` keep-alive connections; CreateSession or MessageSession."""

    def __init__(self, kp, target: dict, kind: str, c: int) -> None:
        self.kp, self.target, self.kind, self.c = kp, target, kind, c
        self.conns: list = []
        self.sessions: list[str] = []

    async def open(self) -> None:
        from bench.http import KeepAlive
        from seed_agents.protocol.wire.dagcbor import decode

        for _ in range(self.c):
            self.conns.append(await KeepAlive.open("127.0.0.1", self.target["port"]))
        if self.kind == "MessageSession":
            for conn in self.conns:
                body = _sign(self.kp, [{"_": "CreateSession", "agentId": self.target["agent_id"]}])[0]
                status, answer = await conn.post(body)
                if status != 200:
                    raise RuntimeError(f"CreateSession for the MessageSession cell: {status} {decode(answer)!r}")
                self.sessions.append(decode(answer)["sessionId"])

    def sign(self, count: int) -> list[list[bytes]]:
        per = max(1, count // self.c)
        if self.kind == "CreateSession":
            return [_sign(self.kp, [{"_": "CreateSession", "agentId": self.target["agent_id"],
                                     "clientRequestId": f"ab-{uuid.uuid4()}"} for _ in range(per)])
                    for _ in self.conns]
        return [_sign(self.kp, [{"_": "MessageSession", "sessionId": sid,
                                 "content": [{"type": "text", "text": f"message {i} says hello"}],
                                 "clientMessageId": f"ab-{uuid.uuid4()}"} for i in range(per)])
                for sid in self.sessions]

    async def run(self, bodies: list[list[bytes]], profile: bool) -> dict:
        from bench.meters import CpuMeter

        pid = self.target["pid"]
        http_url = f"http://127.0.0.1:{self.target['port']}"
        db0 = db_counters(http_url)
        threads0 = thread_counters(pid)
        cpu0 = server_cpu_ns(pid)
        with _Window(pid, profile), CpuMeter(pid) as meter:
            res = await _lanes(self.conns, bodies)
        if self.kind == "MessageSession":
            res["drain_s"] = await wait_idle(pid)   # its turns, counted in its CPU
        res["cpu_ns"] = server_cpu_ns(pid) - cpu0
        res.update(_thread_deltas(pid, threads0, thread_counters(pid)))
        db1 = db_counters(http_url) if db0 is not None else None
        if db0 is not None and db1 is not None:
            res["commits"], res["jobs"] = db1[0] - db0[0], db1[1] - db0[1]
        res["meter"] = meter.result
        return res

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def _combine(chunks: list[dict]) -> dict:
    from bench.stats import latency_figures

    latencies = [x for ch in chunks for x in ch["latencies"]]
    lat = latency_figures(latencies)
    seconds = sum(ch["seconds"] for ch in chunks)
    return {"per_s": lat["n"] / seconds, "p50_ms": lat["p50_ms"], "p99_ms": lat["p99_ms"],
            "cpu_us": sum(ch["cpu_ns"] for ch in chunks) / 1000 / max(1, lat["n"]), "n": lat["n"],
            **_per_action(chunks, lat["n"]),
            "errors": sum(ch["errors"] for ch in chunks),
            "first_error": next((ch["first_error"] for ch in chunks if ch["first_error"]), None),
            "drain_s": sum(ch.get("drain_s", 0.0) for ch in chunks),
            "foreign": max(ch["meter"].get("server_cpu_foreign", 0.0) for ch in chunks),
            # Shares of one CPU over the timed chunks: the server's loop thread, its other threads
            # (the database writer), the load process; what set the pace.
            **{k: statistics.fmean(ch["meter"].get(k, 0.0) for ch in chunks)
               for k in ("main_busy", "other_threads_busy", "load_busy", "load_cpu_foreign")}}


async def round_load(targets: dict, order: list[str], counts: dict, chunks: int, profile: bool,
                     cells: list[str]) -> dict:
    from bench.load import keypair

    kp = keypair(LABEL)
    out: dict = {name: {} for name in targets}
    for cell in cells:
        kind, conc = cell.split(" c")
        drivers = {name: Writes(kp, targets[name], kind, int(conc)) for name in order}
        try:
            for name in order:
                await drivers[name].open()
                await drivers[name].run(drivers[name].sign(max(2 * int(conc), counts[cell] // 8)), False)   # warm-up
            timed: dict = {name: [] for name in order}
            for j in range(chunks):
                k = j % len(order)
                for name in order[k:] + order[:k]:
                    bodies = drivers[name].sign(counts[cell] // chunks)
                    timed[name].append(await drivers[name].run(bodies, profile))
            for name in order:
                out[name][cell] = _combine(timed[name])
        finally:
            for d in drivers.values():
                d.close()
    return out


def raw_verify() -> float:
    """Raw PyNaCl verifies/s of a CreateSession signing input like the load's (best of rounds)."""
    from nacl.signing import VerifyKey

    from bench.load import keypair
    from seed_agents.protocol.wire.dagcbor import decode
    from seed_agents.protocol.wire.envelope import signing_input

    kp = keypair(LABEL)
    env = decode(_sign(kp, [{"_": "CreateSession", "agentId": "a" * 26, "clientRequestId": f"ab-{uuid.uuid4()}"}])[0])
    message, sig, vk = signing_input(env), env["sig"], VerifyKey(env["signer"][2:])
    best = 0.0
    for _ in range(15):
        t = time.perf_counter()
        for _ in range(300):
            vk.verify(message, sig)
        best = max(best, 300 / (time.perf_counter() - t))
    return best


# -- the run and its summary ----------------------------------------------------------------------

FIGURES = ("per_s", "ratio", "p50_ms", "p99_ms", "cpu_us", "writer_cpu_us", "writer_calls", "jobs_per_commit")


def summarize(rounds: list[dict], names: list[str], cells: list[str]) -> dict:
    base = names[0]
    out: dict = {}
    for cell in cells:
        for fig in FIGURES:
            per_tree = {n: [r[n][cell].get(fig, 0.0) for r in rounds] for n in names}
            row = {"median": {n: round(statistics.median(v), 4) for n, v in per_tree.items()}}
            for n in names[1:]:
                pairs = [a / b for a, b in zip(per_tree[n], per_tree[base]) if b]
                # (no pairs: a tree without the figure, e.g. jobs per commit before /metrics had it)
                row[f"{n}/{base}"] = {**_spread(pairs), **geomean_ci(pairs)} if pairs else {}
            out[f"{cell} {fig}"] = row
    return out


def table(summary: dict, names: list[str]) -> str:
    base = names[0]
    lines = ["| cell | figure | " + " | ".join(names) + " | "
             + " | ".join(f"{n}/{base}: geomean (95% CI)" for n in names[1:]) + " |",
             "|---" * (2 + 2 * len(names) - 1) + "|"]
    label = {"per_s": ("actions/s", "/s", 0), "ratio": ("/ raw verify", "", 3), "p50_ms": ("p50", " ms", 2),
             "p99_ms": ("p99", " ms", 2), "cpu_us": ("server CPU per action", " us", 0),
             "writer_cpu_us": ("writer thread's CPU per action", " us", 0),
             "writer_calls": ("writer's write calls per action", "", 1),
             "jobs_per_commit": ("write jobs per commit", "", 1)}
    for key, row in summary.items():
        cell, fig = key.rsplit(" ", 1)
        name, unit, digits = label[fig]
        cols = [f"{row['median'][n]:,.{digits}f}{unit}" for n in names]
        ratios = []
        for n in names[1:]:
            p = row[f"{n}/{base}"]
            ratios.append(f"{p['geomean']:.3f} ({p['ci95'][0]:.3f}..{p['ci95'][1]:.3f})" if p.get("ci95")
                          else f"{p.get('geomean') or 0:.3f}")
        lines.append(f"| {cell} | {name} | " + " | ".join(cols) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main(before_ref: str, after_ref: str, aa: bool, quick: bool, rounds: int | None, cells: list[str],
         quiet_s: float = 0.0, profile_dir: str | None = None) -> dict:
    from bench.load import keypair
    from bench.run import wait_quiet

    n_rounds, counts = sizes(quick)
    n_rounds = rounds or n_rounds
    started = time.monotonic()
    out: dict = {"machine": machine_info(), "loadavg_start": os.getloadavg(), "rounds": n_rounds,
                 "chunks": CHUNKS, "counts": counts, "cells": cells}
    account = keypair(LABEL).account_id
    tmp = Path(tempfile.mkdtemp(prefix="bench-writes-ab-"))
    servers: dict[str, Server] = {}
    names = ["before", "after"] + (["before2"] if aa else [])
    try:
        trees = {}
        for name, ref in (("before", before_ref), ("after", after_ref)):
            trees[name], described = resolve(ref, tmp / f"tree-{name}")
            out[f"{name}_tree"] = {"ref": ref, "commit": described}
        if aa:
            trees["before2"] = trees["before"]
        targets = {}
        for name in names:
            data = tmp / f"data-{name}"
            seeded = seed(trees[name], data, account)
            servers[name] = Server(name, trees[name], data, profile_dir).start()
            targets[name] = {"port": servers[name].port, "pid": servers[name].proc.pid,
                             "agent_id": seeded["agent_id"]}
        print(f"before: {out['before_tree']['commit']}, after: {out['after_tree']['commit']}"
              f"{', A/A: before2' if aa else ''}; {n_rounds} rounds", flush=True)
        out["rounds_data"] = []
        for r in range(n_rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            busy = wait_quiet(quiet_s) if quiet_s else None
            res = run_load("bench.writes_ab:round_load",
                           {"targets": targets, "order": order, "counts": counts, "chunks": CHUNKS,
                            "profile": bool(profile_dir), "cells": cells},
                           timeout=len(cells) * len(names) * (CHUNKS + 1) * (CELL_CAP_S + IDLE_CAP_S) + 120)
            for name, srv in servers.items():
                if not srv.alive():
                    raise RuntimeError(f"the {name} server died: {srv.log_tail()}")
            raw = run_load("bench.writes_ab:raw_verify", {}, cpu=SERVER_CPU, timeout=120)
            for name in names:
                for cell in cells:
                    res[name][cell]["ratio"] = res[name][cell]["per_s"] / raw
            res["order"], res["raw_verify_per_s"], res["cpus_busy_before_round"] = order, raw, busy
            res["loadavg"] = os.getloadavg()
            out["rounds_data"].append(res)
            print(f"round {r + 1}/{n_rounds} (raw verify {raw:,.0f}/s, load average "
                  f"{res['loadavg'][0]:.2f}): " + "; ".join(
                      f"{cell} " + "/".join(f"{res[n][cell]['per_s']:.0f}" for n in names) for cell in cells)
                  + f" per s ({'/'.join(names)})", flush=True)
    finally:
        for srv in servers.values():
            srv.stop()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    out["loadavg_end"] = os.getloadavg()
    out["seconds"] = round(time.monotonic() - started, 1)
    out["names"] = names
    out["summary"] = summarize(out["rounds_data"], names, cells)
    out["errors"] = {n: sum(r[n][c]["errors"] for r in out["rounds_data"] for c in cells) for n in names}
    out["first_errors"] = sorted({r[n][c]["first_error"] for r in out["rounds_data"] for n in names
                                  for c in cells if r[n][c]["first_error"]})
    out["raw_verify_per_s"] = _spread([r["raw_verify_per_s"] for r in out["rounds_data"]], 0)
    out["server_cpu_foreign"] = _spread([r[n][c]["foreign"] for r in out["rounds_data"] for n in names
                                         for c in cells], 2)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="main", help="git ref of the before tree (default main)")
    parser.add_argument("--after", default=".", help="git ref of the after tree, or . for this working tree (default)")
    parser.add_argument("--no-aa", dest="aa", action="store_false", help="no A/A pair (before2)")
    parser.add_argument("--quick", action="store_true", help="3 rounds of smaller chunks (default: 6 rounds)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--cells", nargs="+", choices=CELLS, default=list(CELLS), metavar="CELL")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--profile", metavar="DIR", default=None,
                        help="every server under pyinstrument (bench.profiled_server), profiles in DIR")
    parser.add_argument("--json", metavar="FILE", default=None)
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = main(args.before, args.after, args.aa, args.quick, args.rounds,
                  [c for c in CELLS if c in args.cells], args.wait_quiet, args.profile)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print()
    print(table(result["summary"], result["names"]))
    print()
    print(json.dumps({k: v for k, v in result.items() if k not in ("rounds_data", "summary")}, indent=2))

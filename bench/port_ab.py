"""Two or more source trees on both backends, in one run: GetSession at concurrency 64,
CreateSession at concurrency 8 and MessageSession turns to the echo agent on 8 sessions (the
runtime's scheduling: local on SQLite, leased on PostgreSQL), through each tree's own server
(`python -m seed_agents.server.main` of that tree, or `server.main` in trees from before the namespace) on a fresh SQLite data dir or a fresh PostgreSQL schema,
loaded by this tree's raw client.

    python -m bench.port_ab --tree before=/path/a --tree after=. --tree after2=. \\
        [--postgres URL] [--rounds 3] [--requests 2000] [--turns 400] [--cells CELL ...] [--json FILE]

Naming the same tree twice gives an A/A pair: the noise of the machine. Each round loads every
tree once per cell, in an order that rotates each round, so drift falls on all trees alike.
Figures: throughput (actions/s), p50 latency and the server's CPU time per action (all its
threads, /proc/PID/task/*/schedstat: what neighbours' load moves least) per tree and cell
(median over rounds), and each tree's throughput against the first's. Every phase is bounded in count and time; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg

from seed_agents.protocol.wire.envelope import sign_envelope

from bench.load import Rpc, closed_loop, keypair
from bench.processes import RAISED_LIMITS, free_port
from bench.sqlite_ab import TurnLanes, server_cpu_ns
from bench.trees import server_module, tree_env

CELLS = {"GetSession c64": 64, "CreateSession c8": 8, "turns c8": 8}
CAP_S = 60.0


def fresh_schema(base: str) -> str:
    schema = "bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    from urllib.parse import quote
    return f"{base}{sep}options={quote(f'-c search_path={schema}', safe='')}"


class Server:
    def __init__(self, name: str, tree: Path, backend: str, work: Path, pg_base: str | None) -> None:
        self.name, self.tree, self.backend = name, tree, backend
        self.port = free_port()
        data = work / f"{name}-{backend}"
        data.mkdir(parents=True, exist_ok=True)
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(data), "--log-level", "WARNING",
                *RAISED_LIMITS]
        if backend == "postgresql":
            args += ["--storage-url", fresh_schema(pg_base)]
        self.log = open(data / "server.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", server_module(tree), *args], cwd=str(tree),
                                     env=tree_env(tree), stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} {backend} exited: {(data / 'server.log').read_text()[-1500:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/api/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{name} {backend} did not start")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agents/ws"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


async def prepare(server: Server, kp) -> dict:
    """An echo agent and a session of a few turns (the GetSession answer)."""
    rpc = await Rpc.open(server.url)
    agent = (await rpc.call(kp, {"_": "CreateAgent", "definition": {
        "name": "bench", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo"}}))["agentId"]
    sid = (await rpc.call(kp, {"_": "CreateSession", "agentId": agent}))["sessionId"]
    for i in range(4):
        await rpc.call(kp, {"_": "MessageSession", "sessionId": sid,
                            "content": [{"type": "text", "text": f"hello {i} " * 20}], "clientMessageId": str(uuid.uuid4())})
        for _ in range(300):
            got = await rpc.call(kp, {"_": "GetSession", "sessionId": sid})
            if got["session"]["status"] == "idle":
                break
            await asyncio.sleep(0.02)
    sockets = [rpc] + [await Rpc.open(server.url) for _ in range(15)]
    for s in sockets[1:]:
        await s.call(kp, {"_": "ListModelProviders"})
    return {"agent": agent, "session": sid, "sockets": sockets, "ts": int(time.time() * 1000)}


def frames(kp, state: dict, cell: str, count: int) -> list[bytes]:
    ts = max(int(time.time() * 1000), state["ts"] + 2)
    state["ts"] = ts + count + 1
    if cell.startswith("GetSession"):
        return [sign_envelope(kp, {"_": "GetSession", "sessionId": state["session"], "limit": 21 + i % 9000},
                              ts=ts + i // 9000) for i in range(count)]
    return [sign_envelope(kp, {"_": "CreateSession", "agentId": state["agent"], "title": f"s{i}"}, ts=ts + i)
            for i in range(count)]


async def main_async(args) -> dict:
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.tree)]
    backends = ["sqlite"] + (["postgresql"] if args.postgres else [])
    work = Path(tempfile.mkdtemp(prefix="port_ab-", dir=args.work))   # fresh data dirs every run
    kp = keypair("port-ab")
    results: dict = {}
    for backend in backends:
        servers = [Server(name, tree, backend, work, args.postgres) for name, tree in trees]
        try:
            states = [await prepare(s, kp) for s in servers]
            for cell in args.cells:
                conc = CELLS[cell]
                if cell.startswith("turns"):   # one turn at a time per session, `conc` sessions
                    for s, st in zip(servers, states):
                        st["turns"] = TurnLanes(kp, {"url": s.url, "agent_id": st["agent"]}, conc,
                                                f"{s.name}-{backend}")
                        await st["turns"].open()
                        await st["turns"].run(st["turns"].sign(conc * 10))   # warm-up, not timed
                else:
                    for s, st in zip(servers, states):   # warm-up, not timed
                        await closed_loop(st["sockets"][:min(conc, 16)], frames(kp, st, cell, 200), conc, CAP_S)
                for r in range(args.rounds):
                    order = list(range(len(servers)))
                    order = order[r % len(order):] + order[:r % len(order)]
                    for i in order:
                        st = states[i]
                        cpu0 = server_cpu_ns(servers[i].proc.pid)
                        if cell.startswith("turns"):
                            res = await st["turns"].run(st["turns"].sign(args.turns))
                        else:
                            res = await closed_loop(st["sockets"][:min(conc, 16)],
                                                    frames(kp, st, cell, args.requests), conc, CAP_S)
                        cpu_ns = server_cpu_ns(servers[i].proc.pid) - cpu0
                        lat = sorted(res["latencies"])
                        row = results.setdefault(backend, {}).setdefault(cell, {}).setdefault(servers[i].name, [])
                        row.append({"rps": len(lat) / res["seconds"], "p50_ms": 1000 * lat[len(lat) // 2],
                                    "errors": res["errors"], "first_error": res["first_error"],
                                    "cpu_us": cpu_ns / 1000 / max(1, len(lat))})
            for st in states:
                for s in st["sockets"]:
                    await s.close()
                if "turns" in st:
                    await st["turns"].close()
        finally:
            for s in servers:
                s.stop()
    return results


def report(results: dict, names: list[str]) -> str:
    lines = []
    for backend, cells in results.items():
        for cell, by_tree in cells.items():
            base = statistics.median(r["rps"] for r in by_tree[names[0]])
            parts = []
            for name in names:
                rows = by_tree[name]
                rps = statistics.median(r["rps"] for r in rows)
                p50 = statistics.median(r["p50_ms"] for r in rows)
                cpu = statistics.median(r["cpu_us"] for r in rows)
                errs = sum(r["errors"] for r in rows)
                parts.append(f"{name} {rps:7.0f}/s p50 {p50:6.2f} ms cpu {cpu:6.0f} us ({rps / base:.3f})"
                             f"{' ERR ' + str(errs) if errs else ''}")
            lines.append(f"{backend:10s} {cell:17s} " + " | ".join(parts))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--postgres", default=None, metavar="URL", help="a PostgreSQL database (fresh schemas in it)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=400, help="turns per tree and round in a turns cell")
    parser.add_argument("--cells", nargs="+", choices=list(CELLS), default=list(CELLS), metavar="CELL",
                        help=f"measure only these cells (quoted: {', '.join(repr(c) for c in CELLS)})")
    parser.add_argument("--work", default=None, help="where the run's data dirs go (a new temporary folder in it)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print(report(results, [t.split("=", 1)[0] for t in args.tree]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Bounded answers and caches, before and after in one run: `python -m bench.bench_bounds [--before REF]`.

The same scenario against two source trees: REF (default `main`, extracted with `git archive`
into a temporary directory) and this working tree. Each runs as a child server on loopback with
a fresh data dir: 150 agents get definitions of 900 KB (the review's case) and, separately, of
255 KB (just under the new 256 KiB bound); then one client walks `ListAgents` (following
`nextCursor` where the server gives one) while another sends `GetSession` for a small session in
a loop. Reported per tree and size: agents refused at creation, the largest answer, the pages,
the server's RSS growth during the walk (sampled from /proc every 10 ms) and the longest
`GetSession` wait during it. Nothing is asserted: it prints figures and their ratios.
"""
from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx

from seed_agents.clients.raw import RawV2, sign_envelope, unique_ts
from seed_agents.clients.wire import decode_frame

from bench.load import keypair

ROOT = Path(__file__).resolve().parents[1]
AGENTS = 150


def extract(ref: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Child:
    def __init__(self, tree: Path, data: Path) -> None:
        self.port = free_port()
        data.mkdir(parents=True)
        self.log = open(data / "server.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seed_agents.server.main", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(data), "--log-level", "WARNING"],
            cwd=str(tree), env=dict(os.environ, PYTHONPATH=str(tree)), stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/api/health", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/agents/ws"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.log.close()


def definition(name: str, chars: int) -> dict:
    return {"name": name, "systemPrompt": "be brief", "modelProvider": "echo", "model": "m",
            "metadata": {"blob": "x" * chars}}


async def scenario(tree: Path, data: Path, chars: int) -> dict:
    server = Child(tree, data)
    kp = keypair("bounds")
    try:
        a, b = await RawV2.open(server.url, decode=True), await RawV2.open(server.url, decode=True)
        r = await b.call(kp, {"_": "CreateAgent", "definition": definition("small", 0)})
        sid = (await b.call(kp, {"_": "CreateSession", "agentId": r["agentId"]}))["sessionId"]
        refused = 0
        for start in range(0, AGENTS, 10):
            rs = await asyncio.gather(*[a.call(kp, {"_": "CreateAgent", "definition": definition(f"a{i}", chars)})
                                        for i in range(start, start + 10)])
            refused += sum(r["_"] == "Error" for r in rs)
        raw = await RawV2.open(server.url)   # raw frames: the answer's size as sent
        base = peak = rss(server.proc.pid)
        running = True
        waits: list[float] = []

        async def sample():
            nonlocal peak
            while running:
                peak = max(peak, rss(server.proc.pid))
                await asyncio.sleep(0.01)

        async def other():
            while running:
                t0 = time.perf_counter()
                await b.call(kp, {"_": "GetSession", "sessionId": sid})
                waits.append(time.perf_counter() - t0)

        tasks = [asyncio.create_task(sample()), asyncio.create_task(other())]
        await asyncio.sleep(0.2)
        sizes, listed, cursor = [], 0, None
        t0 = time.perf_counter()
        while True:
            action = {"_": "ListAgents"} if cursor is None else {"_": "ListAgents", "cursor": cursor}
            frame = await raw.request(sign_envelope(kp, action, ts=unique_ts()), timeout=300)
            sizes.append(len(frame))
            answer = decode_frame(frame)["response"]
            listed += len(answer["agents"])
            cursor = answer.get("nextCursor")
            if cursor is None:
                break
        walk = time.perf_counter() - t0
        await asyncio.sleep(0.2)
        running = False
        await asyncio.gather(*tasks)
        for c in (a, b, raw):
            await c.close()
        return {"definition_chars": chars, "refused": refused, "listed": listed, "pages": len(sizes),
                "largest_answer_bytes": max(sizes), "walk_s": round(walk, 3),
                "rss_growth_mib": round((peak - base) / 2**20, 1),
                "getsession_max_wait_ms": round(1000 * max(waits), 1),
                "getsession_answered": len(waits)}
    finally:
        server.stop()


async def main(before_ref: str) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        before = extract(before_ref, Path(tmp) / "before")
        for label, tree in (("before", before), ("after", ROOT)):
            for chars in (900_000, 255_000):
                key = f"{label} {chars // 1000} KB"
                out[key] = await scenario(tree, Path(tmp) / f"data-{label}-{chars}", chars)
                print(key, json.dumps(out[key]), flush=True)
    b, a = out["before 255 KB"], out["after 255 KB"]
    out["ratios (after / before, 255 KB definitions)"] = {
        "largest_answer": round(a["largest_answer_bytes"] / b["largest_answer_bytes"], 3),
        "rss_growth": round(a["rss_growth_mib"] / max(b["rss_growth_mib"], 0.1), 3),
        "getsession_max_wait": round(a["getsession_max_wait_ms"] / max(b["getsession_max_wait_ms"], 0.1), 3)}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="main", help="git ref of the 'before' tree (default main)")
    args = parser.parse_args()
    result = asyncio.run(main(args.before))
    print(json.dumps(result, indent=2))

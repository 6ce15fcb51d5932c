"""A turn's cost with the model's preamble (protocol/agent/preamble.py, server/runtime/preamble.py)
against a tree without it, in one run:

    python -m bench.preamble_ab [--before REF] [--after REF|.] [--turns N] [--rounds R] [--json FILE]

Two source trees (`--before`, default ad48587: main just before the preamble; `--after`, default
`.`), each its own child server (bench/sqlite_ab.TreeServer) on a fresh SQLite data dir, both
answered by one fake OpenAI-compatible provider process (bench.processes.FakeProvider, at once).
Each tree gets the same agent: a non-echo model (echo is given no preamble), 20 memory files in
4 folders, and two accepted collaborators (so the roster is built; offline, no display names).
Each round sends R turns to one tree then to the other, alternating which goes first; each turn
opens a fresh session (so every turn hands the model the same history) and is timed from the
send until the durable assistant append arrives. Figures: p50/p90 turn latency per tree (all
rounds), the server's CPU per turn (all its threads, /proc schedstat), and after/before of each.
Every phase is bounded in count and time; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from seed_agents.clients.raw import signed_request_frame, unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope

from bench.load import Rpc, is_assistant_append, is_error_event, keypair
from bench.processes import FakeProvider
from bench.sqlite_ab import TreeServer, resolve, server_cpu_ns
from bench.stats import percentile

TURN_TIMEOUT = 30.0


async def prepare(url: str, fake_url: str, kp) -> str:
    rpc = await Rpc.open(url)
    await rpc.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {"type": "custom", "baseUrl": fake_url}})
    agent = (await rpc.call(kp, {"_": "CreateAgent", "definition": {
        "name": "preambled", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}}))["agentId"]
    for i in range(20):
        await rpc.call(kp, {"_": "WriteAgentMemoryFile", "agentId": agent, "path": f"topic{i % 4}/note{i}.md",
                            "content": b"remember this " * 20})
    for name in ("pre-bench-a", "pre-bench-b"):
        other = keypair(name)
        await rpc.call(kp, {"_": "InviteAgentCollaborator", "agentId": agent, "accountId": other.account_id,
                            "role": "writer"})
        guest = await Rpc.open(url)
        await guest.call(other, {"_": "AcceptAgentInvite", "agentId": agent})
        await guest.close()
    await rpc.close()
    return agent


async def one_turn(url: str, kp, agent: str, i: int) -> float:
    arrivals: asyncio.Queue = asyncio.Queue()

    def on_event(frame: bytes) -> None:
        if is_assistant_append(frame) or is_error_event(frame):
            arrivals.put_nowait((time.perf_counter(), is_error_event(frame)))

    rpc = await Rpc.open(url, on_event=on_event)
    try:
        sid = (await rpc.call(kp, {"_": "CreateSession", "agentId": agent}))["sessionId"]
        await rpc.call(kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
        env = sign_envelope(kp, {"_": "MessageSession", "sessionId": sid,
                                 "content": [{"type": "text", "text": f"turn {i}"}]}, ts=unique_ts())
        req_id, fut = rpc.register()
        t0 = time.perf_counter()
        await rpc.ws.send(signed_request_frame(req_id, env))
        await asyncio.wait_for(fut, TURN_TIMEOUT)
        arrived, failed = await asyncio.wait_for(arrivals.get(), TURN_TIMEOUT)
        if failed:
            raise RuntimeError("a turn failed")
        return arrived - t0
    finally:
        await rpc.close()


async def measure(servers: dict, fake_url: str, turns: int, rounds: int) -> dict:
    kp = keypair("preamble-ab")
    agents = {name: await prepare(s.url, fake_url, kp) for name, s in servers.items()}
    names = list(servers)
    for name in names:   # warm-up
        for i in range(5):
            await one_turn(servers[name].url, kp, agents[name], i)
    lat: dict = {n: [] for n in names}
    cpu: dict = {n: 0 for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            pid = servers[name].proc.pid
            before = server_cpu_ns(pid)
            for i in range(turns):
                lat[name].append(await one_turn(servers[name].url, kp, agents[name], i))
            cpu[name] += server_cpu_ns(pid) - before
    out = {}
    for name in names:
        ms = [x * 1000 for x in lat[name]]
        out[name] = {"turns": len(ms), "p50_ms": round(percentile(ms, 50), 2), "p90_ms": round(percentile(ms, 90), 2),
                     "server_cpu_ms_per_turn": round(cpu[name] / len(ms) / 1e6, 3)}
    b, a = out["before"], out["after"]
    out["after/before"] = {k: round(a[k] / b[k], 3) for k in ("p50_ms", "p90_ms", "server_cpu_ms_per_turn")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="ad48587")
    parser.add_argument("--after", default=".")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-preamble-"))
    servers = {}
    try:
        trees = {"before": resolve(args.before, work / "before-tree"), "after": resolve(args.after, work / "after-tree")}
        with FakeProvider("plain") as fake:
            for name, (tree, _) in trees.items():
                data = work / f"{name}-data"
                data.mkdir()
                servers[name] = TreeServer(name, tree, data, None).start()
            result = asyncio.run(measure(servers, fake.base_url, min(args.turns, 500), min(args.rounds, 50)))
        result["trees"] = {name: label for name, (_, label) in trees.items()}
    finally:
        for s in servers.values():
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()

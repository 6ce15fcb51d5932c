"""5. Idle connections: N sockets, each subscribed to a session (a small one, replay done), then
left idle: server RSS per socket = (RSS with the sockets - RSS before them) / N. Also the
server's RSS right after start (fresh database). Each run uses a fresh server.
"""
from __future__ import annotations

import asyncio
import time

from seed_agents.clients.raw import connect, signed_request_frame, unique_ts

from bench.load import Rpc, is_replayed, keypair
from bench.meters import CpuMeter, cpu_summary, rss_kb
from bench.processes import Server, run_load
from bench.stats import summary


def sizes(quick: bool) -> tuple[int, int]:
    """(timed runs, sockets)"""
    return (3, 1000) if quick else (5, 5000)


async def load(url: str, label: str, pid: int, sockets: int, settle: float = 2.0) -> dict:
    from seed_agents.protocol.wire.envelope import sign_envelope

    kp = keypair(label)
    admin = await Rpc.open(url)
    agent = await admin.call(kp, {"_": "CreateAgent", "definition": {
        "name": "idle", "systemPrompt": "", "modelProvider": "echo", "model": "echo-1"}})
    session = await admin.call(kp, {"_": "CreateSession", "agentId": agent["agentId"]})
    key = f"sessions/{session['sessionId']}"
    await asyncio.sleep(settle / 2)
    before = rss_kb(pid)

    async def one():
        ws = await connect(url)
        env = sign_envelope(kp, {"_": "Subscribe", "key": key}, ts=unique_ts())
        await ws.send(signed_request_frame(1, env))
        while True:  # response, change, replayed
            frame = await asyncio.wait_for(ws.recv(), 60)
            if is_replayed(frame):
                return ws

    t = time.perf_counter()
    opened = []
    for i in range(0, sockets, 200):
        opened += await asyncio.gather(*(one() for _ in range(min(200, sockets - i))))
    open_s = time.perf_counter() - t
    with CpuMeter(pid) as idle_cpu:
        await asyncio.sleep(settle)  # idle: whatever the server allocated per socket settles
    with_sockets = rss_kb(pid)
    await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    await admin.close()
    await asyncio.sleep(settle / 2)
    after = rss_kb(pid)
    return {"before_kb": before, "with_kb": with_sockets, "after_close_kb": after,
            "per_socket_kb": (with_sockets - before) / sockets, "open_seconds": open_s,
            "cpu": idle_cpu.result}


def run(quick: bool = False) -> dict:
    runs, sockets = sizes(quick)
    rows, start_rss = [], []
    for r in range(runs):
        with Server(f"idle-{r}") as srv:
            start_rss.append(srv.start_rss_kb / 1024)
            rows.append(run_load("bench.idle:load", {"url": srv.url, "label": "idle", "pid": srv.pid,
                                                     "sockets": sockets, "settle": 1.0 if quick else 2.0},
                                    timeout=300))
    return {
        "sockets": sockets,
        "per_socket_kb": summary([x["per_socket_kb"] for x in rows], 1),
        "server_rss_start_mb": summary(start_rss, 1),
        "rss_before_mb": summary([x["before_kb"] / 1024 for x in rows], 1),
        "rss_with_sockets_mb": summary([x["with_kb"] / 1024 for x in rows], 1),
        "rss_after_close_mb": summary([x["after_close_kb"] / 1024 for x in rows], 1),
        "open_seconds": summary([x["open_seconds"] for x in rows], 2),
        "cpu_while_idle": cpu_summary([x["cpu"] for x in rows]),
    }

"""1. Signed RPC over v2: GetSession (20-event session, ~12 KB response) and CreateSession (with a
clientRequestId) at concurrency 1, 8 and 64: actions/s, p50 and p99 latency; and raw Ed25519
verifications/s of the same signing inputs on one core (PyNaCl), for the ratio.

The load process pre-signs every frame of a run before timing it (each frame distinct: a
CreateSession has its own clientRequestId; a GetSession its own (ts, limit) pair, limit >= 21 so
every response carries the same 20 events), then keeps `c` requests outstanding over
min(c, 16) raw v2 sockets (closed loop). The raw verify rate is measured in a process pinned
to the server's CPU while the server is stopped.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid

from seed_agents.clients.raw import now_ms

from bench import dbsetup
from bench.conditions import SERVER_CPU
from bench.load import Rpc, closed_loop, keypair
from bench.meters import CpuMeter, cpu_summary
from bench.processes import Server, profile_window, run_load
from bench.stats import latency_figures, percentile, summary

CONCURRENCY = (1, 8, 64)
EVENT_CHARS = 400  # ~630-byte stored events: 20 of them make a ~12.7 KB GetSession response


def sizes(quick: bool) -> tuple[int, dict[int, int]]:
    """(timed runs, requests per run by concurrency)."""
    if quick:
        return 3, {1: 250, 8: 600, 64: 1200}
    return 5, {1: 1000, 8: 2500, 64: 5000}


def _actions(kind: str, n: int, session_id: str, agent_id: str, counter: list[int]) -> list[dict]:
    out = []
    for _ in range(n):
        i = counter[0]
        counter[0] += 1
        if kind == "GetSession":
            out.append({"_": "GetSession", "sessionId": session_id, "limit": 21 + i % 9979})
        else:
            out.append({"_": "CreateSession", "agentId": agent_id,
                        "clientRequestId": f"bench-{uuid.uuid4()}"})
    return out


def _sign(kp, actions: list[dict], ts: int) -> list[bytes]:
    from seed_agents.protocol.wire.envelope import sign_envelope

    # GetSession frames differ by limit within a block of 9979; the ts moves on per block.
    return [sign_envelope(kp, a, ts=ts + (i // 9979)) for i, a in enumerate(actions)]


def run_row(res: dict, cpu: dict | None) -> dict:
    """One timed run's figures (of a closed loop's result); bench/http.py's too."""
    lat = latency_figures(res["latencies"])
    return {"actions_per_s": len(res["latencies"]) / res["seconds"], "p50_ms": lat["p50_ms"],
            "p99_ms": lat["p99_ms"], "max_ms": lat["max_ms"], "errors": res["errors"],
            "first_error": res["first_error"], "cpu": cpu}


def cell(head: dict, rows: list[dict]) -> dict:
    """A cell's figures over its timed runs (`run_row`s), after `head`: what the cell was
    (concurrency, sockets or connections, requests per run); bench/http.py's too."""
    return {
        **head,
        "actions_per_s": summary([x["actions_per_s"] for x in rows], 1),
        "p50_ms": summary([x["p50_ms"] for x in rows]),
        "p99_ms": summary([x["p99_ms"] for x in rows]),
        "max_ms": summary([x["max_ms"] for x in rows]),
        "cpu": cpu_summary([x["cpu"] for x in rows]),
        "errors": sum(x["errors"] for x in rows),
        "first_error": next((x["first_error"] for x in rows if x["first_error"]), None),
    }


async def load(url: str, label: str, session_id: str, agent_id: str, quick: bool,
               pid: int | None = None) -> dict:
    kp = keypair(label)
    runs, per_run = sizes(quick)
    out: dict = {}
    counters = {"GetSession": [0], "CreateSession": [0]}
    last_ts = 0
    # The floor under any action's latency: a WebSocket ping's round trip on an idle server
    # (transport, both event loops and both websockets stacks, no action code).
    probe = await Rpc.open(url)
    rtts = []
    for _ in range(300):
        t = time.perf_counter()
        await asyncio.wait_for(await probe.ws.ping(), 10)
        rtts.append((time.perf_counter() - t) * 1000)
    await probe.close()
    out["ping_rtt_ms"] = {"p50": round(percentile(rtts, 50), 3), "p99": round(percentile(rtts, 99), 3)}
    for kind in ("GetSession", "CreateSession"):
        for c in CONCURRENCY:
            sockets = [await Rpc.open(url) for _ in range(min(c, 16))]
            for s in sockets:  # bind each socket to the account before timing anything
                await s.call(kp, {"_": "ListModelProviders"})
            n = per_run[c]
            rows = []
            for r in range(runs + 1):  # run 0 is the warm-up
                count = n // 4 if r == 0 else n
                ts = max(now_ms(), last_ts + 2)
                frames = _sign(kp, _actions(kind, count, session_id, agent_id, counters[kind]), ts)
                last_ts = ts + count // 9979 + 1
                if r == 0:
                    await closed_loop(sockets, frames, c, timeout=120)
                    continue
                with profile_window(f"{kind}_c{c}"), CpuMeter(pid) as cpu:
                    res = await closed_loop(sockets, frames, c, timeout=120)
                rows.append(run_row(res, cpu.result))
            for s in sockets:
                await s.close()
            out[f"{kind}_c{c}"] = cell({"concurrency": c, "sockets": len(sockets), "requests_per_run": n}, rows)
    # The response size, for the record.
    probe = await Rpc.open(url)
    frame = await probe.request(_sign(kp, _actions("GetSession", 1, session_id, agent_id, [0]),
                                      max(now_ms(), last_ts + 2))[0])
    out["GetSession_response_bytes"] = len(frame)
    await probe.close()
    return out


def raw_verify(label: str, session_id: str, agent_id: str, quick: bool) -> dict:
    """Raw PyNaCl Ed25519 verifications/s of the signing inputs of a GetSession and a
    CreateSession envelope like the load's, on one core (this process is pinned)."""
    from nacl.signing import VerifyKey

    from seed_agents.protocol.wire.dagcbor import decode
    from seed_agents.protocol.wire.envelope import signing_input

    kp = keypair(label)
    out = {}
    for kind in ("GetSession", "CreateSession"):
        frame = _sign(kp, _actions(kind, 1, session_id, agent_id, [7]), now_ms())[0]
        env = decode(frame)
        message, sig = signing_input(env), env["sig"]
        vk = VerifyKey(env["signer"][2:])
        iterations, rounds = (200, 10) if quick else (500, 20)
        best = 0.0
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(iterations):
                vk.verify(message, sig)
            best = max(best, iterations / (time.perf_counter() - t))
        out[kind] = {"raw_verifies_per_s": round(best, 1), "signing_input_bytes": len(message),
                     "frame_bytes": len(frame)}
    return out


def run(quick: bool = False) -> dict:
    label = "rpc"
    kp = keypair(label)
    data_dir = tempfile.mkdtemp(prefix="bench-rpc-")
    try:
        built = dbsetup.build(data_dir, kp.account_id, {"get": (20, EVENT_CHARS)})
        session_id, agent_id = built["sessions"]["get"], built["agentId"]
        params = {"label": label, "session_id": session_id, "agent_id": agent_id, "quick": quick}
        with Server("rpc", data_dir=data_dir) as srv:
            figures = run_load("bench.rpc:load", {"url": srv.url, "pid": srv.pid, **params}, timeout=600)
            figures["server_rss_kb_end"] = srv.rss_kb()
        raw = run_load("bench.rpc:raw_verify", params, cpu=SERVER_CPU, timeout=120)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    figures["raw_verify"] = raw
    figures["event_bytes"] = built["event_bytes"]["get"]
    for kind in ("GetSession", "CreateSession"):
        limit = raw[kind]["raw_verifies_per_s"]
        for c in CONCURRENCY:
            row = figures[f"{kind}_c{c}"]
            row["ratio_to_raw_verify"] = summary([v / limit for v in row["actions_per_s"]["runs"]], 4)
    return figures


"""6. Sustained load: many accounts send MessageSession (echo provider) at a fixed total rate,
open loop. A turn's latency runs from its *scheduled* send time (so a server that falls behind
is charged for it, no coordinated omission) to its durable assistant append arriving on the
sending socket, which is subscribed to the session. A rate passes when the turn p99 is under
250 ms and nothing failed (no Error response, no error event, every turn finished).

Search: short probe steps at rising rates until one fails, then the full-length run (60 s;
quick: 10 s) at the highest rate that passed its probe; while a full run misses, again at the
highest listed rate <= 70% of the one that missed, at most three full runs in all (quick:
two). A step starts once the server is idle (a missed step can leave runs queued in it) and
waits up to 20 s for its own turns to finish. Every step uses fresh sessions (so session
length, which a turn's history read depends on, is the same at every rate). Each step's frames
are signed before it starts, with ts = the frame's scheduled send time.

Event-loop lag is measured from the outside: the round trip of a WebSocket ping on an idle
socket of its own (the server's websockets protocol answers pings from its event loop),
every 20 ms during the step.
"""
from __future__ import annotations

import asyncio
import collections
import time

from seed_agents.clients.raw import connect, now_ms, signed_request_frame

from bench.load import Rpc, decode, is_assistant_append, is_error_event, is_error_response, keypair
from bench.meters import CpuMeter, thread_cpu
from bench.processes import Server, profile_window, run_load
from bench.stats import percentile, summary

P99_LIMIT_MS = 250.0
RATES = (50, 100, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 3000)
FINAL_ATTEMPTS = 3


def sizes(quick: bool) -> dict:
    if quick:
        return {"accounts": 20, "sessions_per_account": 2, "probe_seconds": 2.0, "final_seconds": 10.0,
                "windows": 5, "final_attempts": 2}
    return {"accounts": 50, "sessions_per_account": 2, "probe_seconds": 5.0, "final_seconds": 60.0,
            "windows": 6, "final_attempts": 3}


class Slot:
    """One socket of one account, subscribed to its own fresh session."""

    def __init__(self, kp) -> None:
        self.kp = kp
        self.rpc: Rpc | None = None
        self.session_id = ""
        self.sent: collections.deque = collections.deque()   # scheduled times of turns in flight
        self.turns: list[tuple[float, float]] = []           # (scheduled, latency s)
        self.failed = 0

    def on_event(self, frame: bytes) -> None:
        if is_assistant_append(frame) and self.sent:
            scheduled = self.sent.popleft()
            self.turns.append((scheduled, time.perf_counter() - scheduled))
            if is_error_event(frame):
                self.failed += 1

    async def open(self, url: str, agent_id: str) -> None:
        self.rpc = await Rpc.open(url, on_event=self.on_event)
        session = await self.rpc.call(self.kp, {"_": "CreateSession", "agentId": agent_id})
        self.session_id = session["sessionId"]
        await self.rpc.call(self.kp, {"_": "Subscribe", "key": f"sessions/{self.session_id}"})


async def _wait_idle(pid: int | None, limit: float) -> float:
    """Wait until the server's threads use < 10% of a CPU over 0.5 s (at most `limit` s)."""
    if not pid:
        return 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        a = sum(thread_cpu(pid))
        await asyncio.sleep(0.5)
        if (sum(thread_cpu(pid)) - a) / 0.5 < 0.1:
            break
    return round(time.perf_counter() - t0, 2)


async def _lag_probe(url: str, stop: asyncio.Event, out: list[float]) -> None:
    ws = await connect(url)
    try:
        while not stop.is_set():
            t = time.perf_counter()
            pong = await ws.ping()
            await asyncio.wait_for(pong, 10)
            out.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0.02)
    finally:
        await ws.close()


async def step(url: str, accounts: list, agents: list[str], spa: int, rate: float, seconds: float,
               windows: int = 1, tag: str = "", pid: int | None = None) -> dict:
    from seed_agents.protocol.wire.envelope import sign_envelope

    # A missed step can leave runs queued in the server; start only once it is idle again.
    settle = await _wait_idle(pid, 45.0)
    slots = [Slot(kp) for kp in accounts for _ in range(spa)]
    agent_of = [agents[i // spa] for i in range(len(slots))]
    await asyncio.gather(*(s.open(url, a) for s, a in zip(slots, agent_of)))
    n = int(rate * seconds)
    # Sign every frame first; ts = its scheduled wall time (well inside the 30 s window).
    t_wall0 = now_ms() + 500 + int(n * 0.06)
    plan = []
    for i in range(n):
        slot = slots[i % len(slots)]
        offset = i / rate
        env = sign_envelope(slot.kp, {"_": "MessageSession", "sessionId": slot.session_id,
                                      "content": [{"type": "text", "text": f"load {tag} {i} hello"}],
                                      "clientMessageId": f"{tag}-{i}"}, ts=t_wall0 + int(offset * 1000))
        plan.append((offset, slot, env))
    while now_ms() < t_wall0:
        await asyncio.sleep(0.005)
    stop = asyncio.Event()
    lags: list[float] = []
    lag_task = asyncio.create_task(_lag_probe(url, stop, lags))
    responses: list[float] = []
    errors = 0
    first_error = None

    def on_response(fut: asyncio.Future, sent_at: float) -> None:
        nonlocal errors, first_error
        if fut.cancelled() or fut.exception() is not None:
            errors += 1
            return
        frame = fut.result()
        responses.append(time.perf_counter() - sent_at)
        if is_error_response(frame):
            errors += 1
            if first_error is None:
                first_error = repr(decode(frame).get("response"))[:300]

    window = profile_window(f"sustained_{tag}")
    window.__enter__()
    meter = CpuMeter(pid).__enter__()
    t0 = time.perf_counter()
    i = 0
    while i < n:
        now = time.perf_counter() - t0
        due = plan[i][0]
        if due > now:
            await asyncio.sleep(due - now)
            continue
        while i < n and plan[i][0] <= now:   # catch up on everything due
            offset, slot, env = plan[i]
            scheduled = t0 + offset
            req_id, fut = slot.rpc.register()
            fut.add_done_callback(lambda f, s=scheduled: on_response(f, s))
            slot.sent.append(scheduled)
            await slot.rpc.ws.send(signed_request_frame(req_id, env))
            i += 1
    send_done = time.perf_counter() - t0
    # Drain: every turn must finish (bounded).
    deadline = time.perf_counter() + 20
    while time.perf_counter() < deadline and any(s.sent for s in slots):
        await asyncio.sleep(0.01)
    wall = time.perf_counter() - t0
    window.__exit__(None, None, None)
    meter.__exit__(None, None, None)
    stop.set()
    await asyncio.gather(lag_task, return_exceptions=True)
    unfinished = sum(len(s.sent) for s in slots)
    failed = sum(s.failed for s in slots)
    turns = sorted(t for s in slots for t in s.turns)
    lat_ms = [lat * 1000 for _, lat in turns]
    per_window = []
    if windows > 1 and turns:
        width = seconds / windows
        for w in range(windows):
            part = [lat * 1000 for sched, lat in turns if w * width <= sched - t0 < (w + 1) * width]
            if part:
                per_window.append(percentile(part, 99))
    await asyncio.gather(*(s.rpc.close() for s in slots), return_exceptions=True)
    p99 = percentile(lat_ms, 99) if lat_ms else float("inf")
    ok = bool(lat_ms) and p99 < P99_LIMIT_MS and errors == 0 and failed == 0 and unfinished == 0
    return {
        "rate": rate, "seconds": seconds, "sent": n, "completed": len(lat_ms),
        "idle_wait_seconds": settle,
        "achieved_per_s": round(len(lat_ms) / wall, 1), "send_seconds": round(send_done, 2),
        "turn_p50_ms": round(percentile(lat_ms, 50), 2), "turn_p99_ms": round(p99, 2),
        "turn_max_ms": round(max(lat_ms, default=float("nan")), 2),
        "response_p50_ms": round(percentile([x * 1000 for x in responses], 50), 2),
        "response_p99_ms": round(percentile([x * 1000 for x in responses], 99), 2),
        "errors": errors, "error_events": failed, "unfinished": unfinished, "first_error": first_error,
        "loop_lag_p50_ms": round(percentile(lags, 50), 2), "loop_lag_p99_ms": round(percentile(lags, 99), 2),
        "loop_lag_max_ms": round(max(lags, default=float("nan")), 2), "lag_samples": len(lags),
        "window_p99_ms": summary(per_window, 2) if per_window else None,
        "cpu": {k: round(v, 2) for k, v in meter.result.items()},
        "passed": ok,
    }


async def load(url: str, label: str, accounts: int, sessions_per_account: int, probe_seconds: float,
               final_seconds: float, windows: int, final_attempts: int = FINAL_ATTEMPTS,
               pid: int | None = None) -> dict:
    kps = [keypair(f"{label}-{i}") for i in range(accounts)]
    agents = []
    for kp in kps:
        rpc = await Rpc.open(url)
        agent = await rpc.call(kp, {"_": "CreateAgent", "definition": {
            "name": "load", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}})
        agents.append(agent["agentId"])
        await rpc.close()
    # Warm-up: a short step at a low rate.
    await step(url, kps, agents, sessions_per_account, RATES[0], 1.0, tag="warm", pid=pid)
    probes = []
    best = None
    for rate in RATES:
        res = await step(url, kps, agents, sessions_per_account, rate, probe_seconds, tag=f"p{rate}",
                         pid=pid)
        probes.append(res)
        if not res["passed"]:
            break
        best = rate
    finals = []
    rate = best
    for _ in range(final_attempts if best is not None else 0):
        res = await step(url, kps, agents, sessions_per_account, rate, final_seconds, windows,
                         tag=f"f{rate}", pid=pid)
        finals.append(res)
        if res["passed"]:
            break
        # Short probes flatter the server (sessions stay short); step well down.
        lower = [r for r in RATES if r <= 0.7 * rate]
        if not lower:
            break
        rate = lower[-1]
    sustained = next((f for f in finals if f["passed"]), None)
    return {"accounts": accounts, "sockets": accounts * sessions_per_account,
            "p99_limit_ms": P99_LIMIT_MS, "probe_seconds": probe_seconds, "final_seconds": final_seconds,
            "highest_passing_rate": sustained["rate"] if sustained else 0,
            "highest_probe_rate": best or 0,
            "sustained": sustained, "finals": finals, "probes": probes,
            "lag_method": "WebSocket ping->pong round trip on an idle socket of its own, every 20 ms, from the load process"}


def run(quick: bool = False) -> dict:
    params = sizes(quick)
    with Server("sustained") as srv:
        out = run_load("bench.sustained:load", {"url": srv.url, "pid": srv.pid, "label": "sustained", **params},
                       timeout=900)
        out["server_rss_mb_end"] = round(srv.rss_kb() / 1024, 1)
    return out

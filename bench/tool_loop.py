"""The tool loop's own cost: a turn of 5 tool steps against a plain turn, on the fake
OpenAI-compatible provider (a separate process answering at once), in one run.

Every turn opens a fresh session. A plain turn is one model request. A 5-step turn is six: five answered with one tool call
(`read ~/self`, which costs nothing itself) and the last with the reply; each step records its
call and its result (two transactions) before the next request. So

    loop cost per step = (p50 5-step turn - p50 plain turn) / 5 - p50 fake request

where the fake request is a streamed chat completion timed from this process alone, with the
body the server sent on the last step of a 5-step turn (system prompt, the five verbs' schemas,
the calls and results so far): what an HTTP client pays the fake for one step. Goal: under 2 ms
per step. `python -m bench.tool_loop [--turns N]` prints the figures as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx

from seed_agents.clients.raw import signed_request_frame, unique_ts

from bench.load import Rpc, is_assistant_append, is_error_event, keypair
from bench.processes import FakeProvider, Server
from bench.stats import latency_figures

STEPS = 5
TOOL_STEP = {"chunks": [], "tool_calls": [{"id": "", "name": "read", "arguments": "{\"address\": \"~/self\"}"}]}


async def _session(url: str, kp, agent_id: str):
    arrivals: asyncio.Queue = asyncio.Queue()

    def on_event(frame: bytes) -> None:
        if is_assistant_append(frame) or is_error_event(frame):
            arrivals.put_nowait((time.perf_counter(), is_error_event(frame)))

    rpc = await Rpc.open(url, on_event=on_event)
    session = await rpc.call(kp, {"_": "CreateSession", "agentId": agent_id})
    await rpc.call(kp, {"_": "Subscribe", "key": f"sessions/{session['sessionId']}"})
    return rpc, session["sessionId"], arrivals


async def _turns(url: str, kp, agent_id: str, fake: httpx.AsyncClient, n: int, steps: int) -> list[float]:
    """`n` turns, each the first of a fresh session (so every turn hands the model the same
    history: a long session would time its growing requests instead of the loop)."""
    out = []
    for i in range(n):
        out += await _one_turn(url, kp, agent_id, fake, i, steps)
    return out


async def _one_turn(url: str, kp, agent_id: str, fake: httpx.AsyncClient, i: int, steps: int) -> list[float]:
    from seed_agents.protocol.wire.envelope import sign_envelope

    rpc, session_id, arrivals = await _session(url, kp, agent_id)
    try:
        for _ in range(steps):
            (await fake.post("/_fake/script", json=TOOL_STEP)).raise_for_status()
        env = sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                 "content": [{"type": "text", "text": f"turn {i}"}]}, ts=unique_ts())
        req_id, fut = rpc.register()
        t0 = time.perf_counter()
        await rpc.ws.send(signed_request_frame(req_id, env))
        await asyncio.wait_for(fut, 30)
        arrived, failed = await asyncio.wait_for(arrivals.get(), 30)
        if failed:
            raise RuntimeError("a turn failed")
        return [arrived - t0]
    finally:
        await rpc.close()


async def _fake_requests(fake: httpx.AsyncClient, n: int) -> list[float]:
    recorded = (await fake.get("/_fake/requests")).json()["requests"]
    body = [r["body"] for r in recorded if r["path"].endswith("/chat/completions")][-1]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with fake.stream("POST", "/v1/chat/completions", json=body) as response:
            async for _ in response.aiter_bytes():
                pass
        out.append(time.perf_counter() - t0)
    return out


async def measure(url: str, fake_url: str, turns: int, metrics_text) -> dict:  # noqa: ANN001
    kp = keypair("tool-loop")
    admin = await Rpc.open(url)
    await admin.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {"type": "custom", "baseUrl": fake_url}})
    agent = await admin.call(kp, {"_": "CreateAgent", "definition": {
        "name": "looper", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}})
    await admin.close()
    async with httpx.AsyncClient(base_url=fake_url.rsplit("/v1", 1)[0], timeout=30) as fake:
        await _turns(url, kp, agent["agentId"], fake, max(5, turns // 5), STEPS)   # warm-up
        plain, looped = [], []
        for _ in range(4):   # interleaved, so both see the same machine
            plain += await _turns(url, kp, agent["agentId"], fake, turns // 4, 0)
            looped += await _turns(url, kp, agent["agentId"], fake, turns // 4, STEPS)
        fake_req = await _fake_requests(fake, turns)
    p, l, f = latency_figures(plain), latency_figures(looped), latency_figures(fake_req)
    inside = _overhead(metrics_text())
    per_step = (l["p50_ms"] - p["p50_ms"]) / STEPS - f["p50_ms"]
    per_step_p99 = (l["p99_ms"] - p["p99_ms"]) / STEPS - f["p50_ms"]
    return {"plain_turn": p, "five_step_turn": l, "fake_request": f,
            "loop_cost_per_step_p50_ms": round(per_step, 3), "loop_cost_per_step_p99_ms": round(per_step_p99, 3),
            "goal_per_step_ms": 2.0, "server_measured_step_overhead": inside}


def _overhead(text: str) -> dict:
    """The server's own account (seed_agents_tool_step_overhead_seconds): mean and bucket counts."""
    total = count = 0.0
    buckets = {}
    for line in text.splitlines():
        if line.startswith("seed_agents_tool_step_overhead_seconds_sum"):
            total = float(line.split()[-1])
        elif line.startswith("seed_agents_tool_step_overhead_seconds_count"):
            count = float(line.split()[-1])
        elif line.startswith("seed_agents_tool_step_overhead_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets[le] = float(line.split()[-1])
    share = {f"<= {le} s": round(n / count, 3) for le, n in buckets.items() if count and le in ("0.001", "0.002", "0.005")}
    return {"steps": int(count), "mean_ms": round(1000 * total / count, 3) if count else None, **share}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args(argv)
    with FakeProvider("plain") as fake, Server("tool-loop") as server:
        result = asyncio.run(measure(server.url, fake.base_url, args.turns, server.metrics))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

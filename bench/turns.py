"""4. A MessageSession turn end to end: from sending the MessageSession to the durable assistant
append arriving on a socket subscribed to the session (the same socket, as the desktop does),
with the built-in echo provider and with a fake OpenAI-compatible provider on loopback (a
separate process pinned to the load CPU, answering at once, streamed). One turn at a time;
p50 and p99 over the turns of a run, each run on a fresh session.
"""
from __future__ import annotations

import asyncio
import time

from seed_agents.clients.raw import signed_request_frame, unique_ts

from bench.load import Rpc, is_assistant_append, is_error_event, is_error_response, keypair
from bench.meters import CpuMeter, cpu_summary
from bench.processes import FakeProvider, Server, profile_window, run_load
from bench.stats import latency_figures, summary


def sizes(quick: bool) -> tuple[int, int]:
    """(timed runs, turns per run)"""
    return (3, 80) if quick else (5, 200)


async def _session_socket(url: str, kp, agent_id: str):
    """A socket subscribed to a fresh session; returns (rpc, session id, arrivals queue)."""
    arrivals: asyncio.Queue = asyncio.Queue()

    def on_event(frame: bytes) -> None:
        if is_assistant_append(frame):
            arrivals.put_nowait((time.perf_counter(), is_error_event(frame)))

    rpc = await Rpc.open(url, on_event=on_event)
    session = await rpc.call(kp, {"_": "CreateSession", "agentId": agent_id})
    await rpc.call(kp, {"_": "Subscribe", "key": f"sessions/{session['sessionId']}"})
    return rpc, session["sessionId"], arrivals


async def _turns(rpc: Rpc, kp, session_id: str, arrivals: asyncio.Queue, n: int, tag: str) -> dict:
    from seed_agents.protocol.wire.envelope import sign_envelope

    frames = [sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                 "content": [{"type": "text", "text": f"turn {i} says hello world"}],
                                 "clientMessageId": f"{tag}-{i}"}, ts=unique_ts())
              for i in range(n)]
    turn_lat, resp_lat, errors = [], [], 0
    for env in frames:
        req_id, fut = rpc.register()
        t0 = time.perf_counter()
        await rpc.ws.send(signed_request_frame(req_id, env))
        response = await asyncio.wait_for(fut, 30)
        resp_lat.append(time.perf_counter() - t0)
        arrived, failed = await asyncio.wait_for(arrivals.get(), 30)
        turn_lat.append(arrived - t0)
        errors += failed or is_error_response(response)
    quarter = max(1, n // 4)
    return {"turn": latency_figures(turn_lat), "response": latency_figures(resp_lat), "errors": errors,
            "latencies": turn_lat,
            "first_quarter": latency_figures(turn_lat[:quarter]),
            "last_quarter": latency_figures(turn_lat[-quarter:])}


async def load(url: str, label: str, provider: str, fake_url: str | None, runs: int, turns: int,
               pid: int | None = None) -> dict:
    kp = keypair(label)
    admin = await Rpc.open(url)
    if provider == "fake":
        await admin.call(kp, {"_": "SetModelProvider", "name": "fake",
                              "provider": {"type": "custom", "baseUrl": fake_url}})
        definition = {"name": "fake", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}
    else:
        definition = {"name": "echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}
    agent = await admin.call(kp, {"_": "CreateAgent", "definition": definition})
    agent_id = agent["agentId"]
    rows = []
    for r in range(runs + 1):   # run 0 is the warm-up (a quarter of the turns)
        rpc, session_id, arrivals = await _session_socket(url, kp, agent_id)
        with profile_window(f"turns_{provider}" if r else "warm-up"), CpuMeter(pid) as cpu:
            res = await _turns(rpc, kp, session_id, arrivals, turns // 4 if r == 0 else turns,
                               f"{provider}-{r}")
        await rpc.close()
        if r:
            rows.append({**res, "cpu": cpu.result})
    await admin.close()
    return {
        "provider": provider, "turns_per_run": turns,
        "p50_ms": summary([x["turn"]["p50_ms"] for x in rows]),
        "p99_ms": summary([x["turn"]["p99_ms"] for x in rows]),
        "max_ms": summary([x["turn"]["max_ms"] for x in rows]),
        "first_quarter_p50_ms": summary([x["first_quarter"]["p50_ms"] for x in rows]),
        "last_quarter_p50_ms": summary([x["last_quarter"]["p50_ms"] for x in rows]),
        "response_p50_ms": summary([x["response"]["p50_ms"] for x in rows]),
        "response_p99_ms": summary([x["response"]["p99_ms"] for x in rows]),
        "cpu": cpu_summary([x["cpu"] for x in rows]),
        "errors": sum(x["errors"] for x in rows),
    }


def run(quick: bool = False) -> dict:
    runs, turns = sizes(quick)
    out = {}
    with Server("turns-echo") as srv:
        out["echo"] = run_load("bench.turns:load", {"url": srv.url, "pid": srv.pid, "label": "turns-echo", "provider": "echo",
                                                    "fake_url": None, "runs": runs, "turns": turns}, timeout=600)
    with FakeProvider("plain") as fake, Server("turns-fake") as srv:
        out["fake"] = run_load("bench.turns:load", {"url": srv.url, "pid": srv.pid, "label": "turns-fake", "provider": "fake",
                                                    "fake_url": fake.base_url, "runs": runs, "turns": turns},
                               timeout=600)
    return out

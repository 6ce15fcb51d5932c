"""2. Replay: Subscribe with afterSeq 0 to sessions of 10,000 and 100,000 events (~430 bytes
each): time to the last event received, events/s, and the server's RSS (VmRSS of the server
process, sampled every 10 ms by a thread of the load process) before, at peak and after.

The sessions are written straight into the database file before the server starts (one
transaction, bench.dbsetup). Each replay is a fresh socket reading as fast as it can; the load
side counts the events of each batched append frame from its array head, without decoding.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import time

from seed_agents.clients.raw import connect, signed_request_frame, unique_ts

from bench import dbsetup
from bench.load import appended_count, is_append, is_replayed, keypair
from bench.meters import CpuMeter, RssSampler, cpu_summary, rss_kb
from bench.processes import Server, profile_window, run_load
from bench.stats import summary

EVENT_CHARS = 200   # ~430-byte stored SessionEvents


def sizes(quick: bool) -> tuple[int, dict[str, int]]:
    if quick:
        return 3, {"10k": 10_000, "100k": 100_000}
    return 5, {"10k": 10_000, "100k": 100_000}


async def replay_once(url: str, kp, session_id: str, expected: int, timeout: float = 120.0) -> dict:
    from seed_agents.protocol.wire.envelope import sign_envelope

    ws = await connect(url, max_queue=64)
    envelope = sign_envelope(kp, {"_": "Subscribe", "key": f"sessions/{session_id}", "afterSeq": 0},
                             ts=unique_ts())
    events = frames = nbytes = 0
    t_last = None
    t0 = time.perf_counter()
    await ws.send(signed_request_frame(1, envelope))
    deadline = t0 + timeout
    while True:
        frame = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.perf_counter()))
        frames += 1
        nbytes += len(frame)
        if is_append(frame):
            events += appended_count(frame)
            t_last = time.perf_counter()
        elif is_replayed(frame):
            t_end = time.perf_counter()
            break
    elapsed = (t_last or t_end) - t0
    await ws.close()
    return {"events": events, "expected": expected, "seconds": elapsed,
            "seconds_to_replayed": t_end - t0, "events_per_s": events / elapsed if elapsed else 0.0,
            "frames": frames, "mbytes": nbytes / 1e6, "t0": t0, "t_end": t_end}


async def load(url: str, label: str, pid: int, sessions: dict, runs: int) -> dict:
    kp = keypair(label)
    out: dict = {}
    for name, (session_id, expected) in sessions.items():
        await asyncio.sleep(0.5)
        rss_before = rss_kb(pid)
        sampler = RssSampler(pid, 0.01).start()
        rows, rss_after_3 = [], None
        for r in range(runs + 1):   # run 0 is the warm-up
            with profile_window(f"replay_{name}" if r else "warm-up"), CpuMeter(pid) as cpu:
                res = await replay_once(url, kp, session_id, expected)
            res["cpu"] = cpu.result
            await asyncio.sleep(0.1)
            window = [kb for t, kb in sampler.samples if res["t0"] <= t <= res["t_end"] + 0.1]
            res["peak_kb"] = max(window, default=rss_kb(pid))
            if r == 0:
                continue
            rows.append(res)
            if r == 3:
                await asyncio.sleep(1.0)
                rss_after_3 = rss_kb(pid)
        sampler.stop()
        await asyncio.sleep(1.0)
        rss_after = rss_kb(pid)
        complete = all(x["events"] == expected for x in rows)
        out[name] = {
            "events": expected, "complete": complete,
            "event_counts": [x["events"] for x in rows],
            "seconds": summary([x["seconds"] for x in rows], 4),
            "events_per_s": summary([x["events_per_s"] for x in rows], 0),
            "mbytes": round(rows[0]["mbytes"], 2), "frames": rows[0]["frames"],
            "rss_before_mb": round(rss_before / 1024, 1),
            "rss_peak_mb": summary([x["peak_kb"] / 1024 for x in rows], 1),
            "rss_growth_mb": summary([(x["peak_kb"] - rss_before) / 1024 for x in rows], 1),
            "rss_after_3_replays_mb": round(rss_after_3 / 1024, 1) if rss_after_3 else None,
            "rss_after_all_mb": round(rss_after / 1024, 1),
            "samples": len(sampler.samples),
            "cpu": cpu_summary([x["cpu"] for x in rows]),
        }
    return out


def run(quick: bool = False) -> dict:
    label = "replay"
    kp = keypair(label)
    runs, wanted = sizes(quick)
    data_dir = tempfile.mkdtemp(prefix="bench-replay-")
    try:
        built = dbsetup.build(data_dir, kp.account_id, {k: (n, EVENT_CHARS) for k, n in wanted.items()})
        sessions = {k: (built["sessions"][k], n) for k, n in wanted.items()}
        with Server("replay", data_dir=data_dir) as srv:
            out = run_load("bench.replay:load", {"url": srv.url, "label": label, "pid": srv.pid,
                                                 "sessions": sessions, "runs": runs}, timeout=600)
            out["server_rss_start_mb"] = round(srv.start_rss_kb / 1024, 1)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    out["setup_seconds"] = built["seconds"]
    out["event_bytes"] = built["event_bytes"]
    return out

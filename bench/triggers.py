"""Triggers (issue 26): 10,000 enabled schedule triggers on one server (SQLite).

1. Idle: the server's CPU over a window in which none of the 10,000 is due (weekly slots days
   away), against the same server with no triggers: what the scheduler costs while it waits
   (one timer set to the earliest slot; it must not poll). Reported as CPU seconds per minute.
2. Delay: with the 10,000 still there, 1,000 one-time triggers due over the next minute (about 17
   a second, each starting a session and an echo run). For each, the time from its slot to its
   session's first event (the trigger's message, read from the database after the run), p50/p99.

`python -m bench.triggers [--quick]` prints the figures as JSON (quick: 2,000 + 200, short windows).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import time

from seed_agents.clients import AgentsClient
from seed_agents.protocol.wire.keys import Keypair

from bench.meters import CpuMeter
from bench.processes import Server
from bench.stats import percentile

ECHO = {"name": "bench", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}
PER_AGENT = 100
EXTRA = ["--trigger-max-per-agent", "1000", "--trigger-firings-per-hour", "100000"]


def sizes(quick: bool) -> dict:
    if quick:
        return {"triggers": 2_000, "due": 200, "idle_s": 10.0, "window_s": 20.0}
    return {"triggers": 10_000, "due": 1_000, "idle_s": 30.0, "window_s": 60.0}


async def create_triggers(url: str, count: int, source_of) -> list[str]:  # noqa: ANN001
    """`count` triggers over count/PER_AGENT agents of one account, 64 requests in flight."""
    owner = Keypair.generate()
    async with AgentsClient.connect(url, owner, request_timeout=120) as c:
        agents = [(await c.create_agent(ECHO))["agentId"] for _ in range(max(1, count // PER_AGENT))]
        ids: list[str] = []
        for start in range(0, count, 64):
            batch = range(start, min(count, start + 64))
            made = await asyncio.gather(*(c.create_agent_trigger(agents[i % len(agents)], {
                "name": f"t{i}", "source": source_of(i), "prompt": f"tick {i}"}) for i in batch))
            ids += [m["trigger"]["id"] for m in made]
        return ids


def weekly(rng: random.Random):  # noqa: ANN201
    """A weekly slot at least a day away from now, whatever the weekday (so none is due)."""
    today = (time.gmtime().tm_wday + 1) % 7   # 0 = Sunday, as the schedules count
    days = [(today + 2 + rng.randrange(5)) % 7]
    return lambda i: {"type": "schedule", "schedule": {
        "kind": "weekly", "daysOfWeek": days, "timeOfDay": f"{rng.randrange(24):02d}:{rng.randrange(60):02d}",
        "timezone": rng.choice(["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"])}}


async def idle_cpu(srv: Server, seconds: float) -> dict:
    await asyncio.sleep(2.0)   # start-up and creation work settles
    with CpuMeter(srv.pid) as meter:
        await asyncio.sleep(seconds)
    r = meter.result
    busy = r["main_busy"] + r["other_threads_busy"]
    return {"window_s": r["wall_s"], "cpu_s_per_min": round(busy * 60, 3), "main_busy": round(r["main_busy"], 4),
            "other_threads_busy": round(r["other_threads_busy"], 4)}


async def main(quick: bool) -> dict:
    n = sizes(quick)
    rng = random.Random(26)
    out: dict = {"sizes": n}
    with Server("triggers-none", extra=EXTRA) as base:
        out["idle_no_triggers"] = await idle_cpu(base, n["idle_s"])
    srv = Server("triggers-10k", extra=EXTRA).start()
    try:
        t = time.perf_counter()
        await create_triggers(srv.url, n["triggers"], weekly(rng))
        out["create_s"] = round(time.perf_counter() - t, 1)
        out["idle_with_triggers"] = await idle_cpu(srv, n["idle_s"])
        # 2: one-time triggers due over the window, spread evenly.
        start = int(time.time() * 1000) + 5_000
        step = int(n["window_s"] * 1000 / n["due"])
        due = await create_triggers(srv.url, n["due"], lambda i: {
            "type": "schedule", "schedule": {"kind": "once", "runAt": start + i * step}})
        await asyncio.sleep((start - time.time() * 1000) / 1000 + n["window_s"] + 5.0)
    finally:
        srv.stop()
    db = sqlite3.connect(f"file:{srv.data_dir}/agents.sqlite?mode=ro", uri=True)
    rows = db.execute(
        "SELECT f.scheduled_at, e.created_at FROM trigger_firings f JOIN session_events e"
        " ON e.session_id = f.session_id AND e.seq = 1 WHERE f.trigger_id IN (SELECT value FROM json_each(?))",
        (json.dumps(due),)).fetchall()
    statuses = dict(db.execute("SELECT status, count(*) FROM trigger_firings GROUP BY 1").fetchall())
    replies = db.execute("SELECT count(*) FROM session_events WHERE seq = 2").fetchone()[0]
    db.close()
    delays = [created - slot for slot, created in rows]
    out["delay_ms"] = {"fired": len(delays), "of": n["due"], "p50": percentile(delays, 50),
                       "p99": percentile(delays, 99), "max": max(delays) if delays else None}
    out["firings_by_status"] = statuses
    out["sessions_answered"] = replies
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(asyncio.run(main(parser.parse_args().quick)), indent=2))

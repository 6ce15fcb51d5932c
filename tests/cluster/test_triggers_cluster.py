"""Three server processes on one PostgreSQL database share schedule triggers on a sped-up
trigger clock (`--trigger-clock-speed`, one `--trigger-clock-epoch-ms` for all), and one of them
is SIGKILLed while they fire. Every slot of every trigger fires exactly once: one firing per
slot key, no slot missing between the first and the last, each firing with exactly one session.

`-m slow`: three servers, 50 triggers at a one-minute interval, a minute every 6 s (each firing
starts a session and an echo run, so the cluster runs 8 turns a second besides), 10 slots. The default version: two servers (one killed), 8 triggers, a minute a second, 4 slots."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest

from seed_agents.clients import AgentsClient
from seed_agents.protocol.wire.keys import Keypair

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess
from tests.cluster.test_cluster_servers import start_servers

MIN = 60_000
ECHO = {"name": "echo", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


async def _share_schedules(tmp_path: Path, url: str, count: int, triggers: int, speed: float, slots: int) -> None:
    epoch = int(time.time() * 1000)
    extra = ["--storage-url", url, "--trigger-clock-speed", str(speed), "--trigger-clock-epoch-ms", str(epoch),
             "--trigger-firings-per-hour", "1000000", "--rate-limit", "100000", "--rate-burst", "100000",
             "--run-lease", "3", "--log-level", "WARNING"]
    servers: list[ServerProcess] = await start_servers(tmp_path, count, extra)
    try:
        owner = Keypair.generate()
        # Made through the server that is killed: the others learn of the triggers from its
        # notices (their timers were idle, capped at 30 s: far past the slots of this test).
        async with AgentsClient.connect(servers[1].url, owner) as c:
            agent_id = (await c.create_agent(ECHO))["agentId"]
            every = {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "minutes"}}
            ids = [(await c.create_agent_trigger(agent_id, {"name": f"t{i}", "source": every, "prompt": f"tick {i}"}))
                   ["trigger"]["id"] for i in range(triggers)]
        slot_s = 60 / speed
        # Run past the first slots, SIGKILL one server while the others keep firing, run on (the
        # trigger clock's time passing is what is tested: these sleeps are its slots).
        await asyncio.sleep(slot_s * (slots // 2) + slot_s / 3)
        servers[1].kill()
        killed_at = epoch + (time.time() * 1000 - epoch) * speed   # on the trigger clock
        await asyncio.sleep(slot_s * (slots - slots // 2))
        for srv in servers[:1] + servers[2:]:
            assert srv.terminate() == 0
    finally:
        for srv in servers:
            srv.kill()

    with psycopg.connect(url) as conn:
        # (shown with -s: how late each slot was taken, in trigger-clock ms, p50 / p90 / max)
        print("firings:", conn.execute("SELECT status, count(*), percentile_cont(ARRAY[0.5, 0.9, 1.0])"
                                       " WITHIN GROUP (ORDER BY created_at - scheduled_at) FROM trigger_firings"
                                       " GROUP BY 1").fetchall(), "speed", speed)
        rows = conn.execute("SELECT trigger_id, activity_key, status, scheduled_at, session_id FROM trigger_firings"
                            " WHERE trigger_id = ANY(%s)", (ids,)).fetchall()
        created = {r[0]: r[1] for r in conn.execute("SELECT id, created_at FROM agent_triggers").fetchall()}
        sessions = conn.execute("SELECT count(*) FROM sessions WHERE agent_id = %s", (agent_id,)).fetchone()[0]
    by_trigger: dict[str, list[tuple]] = {t: [] for t in ids}
    for row in rows:
        by_trigger[row[0]].append(row)
    for trigger_id, firings in by_trigger.items():
        firings.sort(key=lambda r: r[3])
        slots_fired = [r[3] for r in firings]
        assert len(firings) >= slots - 2, (trigger_id, len(firings))
        assert slots_fired[0] == created[trigger_id] + MIN            # the first slot after creation
        assert all(b - a == MIN for a, b in zip(slots_fired, slots_fired[1:])), slots_fired   # none missing
        assert len({r[1] for r in firings}) == len(firings)            # each key once
        assert [r[1] for r in firings] == [f"schedule:{trigger_id}:{s}" for s in slots_fired]
        assert all(r[2] == "created" and r[4] for r in firings), [r[2] for r in firings]
        assert slots_fired[-1] > killed_at   # the survivors went on firing after the kill
    assert sessions == len(rows) == len({r[4] for r in rows})       # one session per firing


@pytest.mark.timeout(120)
async def test_two_servers_share_schedules_one_killed(tmp_path, postgres_url):  # noqa: F811
    await _share_schedules(tmp_path, postgres_url, count=2, triggers=8, speed=60, slots=4)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_three_servers_share_fifty_minutely_schedules_one_killed(tmp_path, postgres_url):  # noqa: F811
    await _share_schedules(tmp_path, postgres_url, count=3, triggers=50, speed=10, slots=10)

"""--turn-timings: each MessageSession turn's phases on the server, in /metrics
(server/operations/turn_timing.py); off by default, and then nothing is timed."""
from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import running_server, server_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.runtime.test_runtime_turns import provider_session, send, until_durable
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")

PHASES = ("accept", "queue", "prepare", "provider", "finish", "publish", "own", "total")
CHUNK_DELAY = 0.1   # between the fake's three chunks: its stream takes at least 0.2 s


async def metrics(server) -> str:
    async with httpx.AsyncClient(timeout=10) as http:
        return (await http.get(f"http://{server.host}:{server.port}/metrics")).text


def phases(text: str, metric: str = "seconds") -> dict[str, tuple[float, float]]:
    """{phase: (count, sum in seconds)} of seed_agents_turn_phase_<metric>."""
    found: dict[str, list[float]] = {}
    for kind, phase, value in re.findall(
            rf'^seed_agents_turn_phase_{metric}_(count|sum)\{{phase="(\w+)"\}} (\S+)$', text, re.M):
        found.setdefault(phase, [0.0, 0.0])[kind == "sum"] = float(value)
    return {phase: (count, total) for phase, (count, total) in found.items()}


async def test_each_turns_phases_are_timed_and_the_providers_stream_is_told_apart(tmp_path, storage, request):
    a = keypair("A")
    async with running_server(server_config(tmp_path, storage, request, turn_timings=True)) as server:
        async with FakeOpenAI(Script(chunks=["one ", "two ", "three"], chunk_delay=CHUNK_DELAY)) as fake:
            c = await V2Client.open(server.url)
            try:
                _, sid = await provider_session(c, a, fake)
                await c.event()
                await c.event()   # change, replayed
                for i in range(3):
                    await send(c, a, sid, f"turn {i}")
                    await until_durable(c, 2)   # its user message, then the reply
            finally:
                await c.close()
        text = await metrics(server)
    got = phases(text)
    assert sorted(got) == sorted(PHASES), got
    for phase in PHASES:
        count, seconds = got[phase]
        assert count == 3 and seconds > 0, (phase, got[phase])
    # The provider's stream (three chunks, two delays each turn) is its own phase; the server's
    # own time is the rest of the turn, exactly.
    assert got["provider"][1] >= 3 * 2 * CHUNK_DELAY
    assert got["own"][1] + got["provider"][1] == pytest.approx(got["total"][1], abs=1e-6)
    assert sum(got[p][1] for p in PHASES[:6]) == pytest.approx(got["total"][1], abs=1e-6)
    # The event loop's CPU in each phase: counted alike, and never more than the phase's time.
    cpu = phases(text, "loop_cpu_seconds")
    assert sorted(cpu) == sorted(PHASES[:6] + ("own",)), cpu
    for phase, (count, seconds) in cpu.items():
        assert count == 3 and 0 < seconds <= got[phase][1] + 1e-3, (phase, cpu[phase], got[phase])


async def test_off_by_default_nothing_is_timed(server):
    a = keypair("B")
    c = await V2Client.open(server.url)
    try:
        r = await c.call(a, {"_": "CreateAgent", "definition": {"name": "echo", "systemPrompt": "",
                                                               "modelProvider": "echo", "model": "echo"}})
        session = await c.call(a, {"_": "CreateSession", "agentId": r["agentId"]})
        await c.call(a, {"_": "Subscribe", "key": f"sessions/{session['sessionId']}"})
        await send(c, a, session["sessionId"], "hello")
        await until_durable(c, 2)
    finally:
        await c.close()
    assert server.app.runtime.timings is None
    assert "seed_agents_turn_phase_seconds" not in await metrics(server)

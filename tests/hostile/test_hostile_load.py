"""Findings 1 to 4 of issue 27 together (docs/operations.md "Security"): four attackers (each
one of every kind: answers never read, decode bombs, pipelined probe floods, headers that never
end; in a process of their own, tests/hostile_attack.py) while an honest client calls
GetSession over its socket. Its p99 stays low: the 30-second run (slow, `make stress`) holds it
under 50 ms (on a machine of its own); the default suite runs 3 seconds with a looser bound."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.hostile_measure import attackers, cpu_seconds, finish, percentile, rss
from tests.procs import ServerProcess
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session


async def honest_under_attack(tmp_path, seconds: float) -> tuple[list[float], dict, float, int]:
    srv = ServerProcess(tmp_path / "srv", extra=["--write-timeout", "2", "--http-idle-timeout", "2",
                                                 "--rate-limit", "100000", "--rate-burst", "100000"]).start()
    pid = srv.proc.pid
    kp, victim = keypair("honest"), keypair("unread owner")
    honest = await V2Client.open(srv.url)
    owner = await V2Client.open(srv.url)
    try:
        _, session_id = await setup_session(honest, kp)
        for i in range(3):
            await honest.call(kp, {"_": "MessageSession", "sessionId": session_id,
                                   "content": [{"type": "text", "text": f"question {i}"}]})
        # The session whose answer (about 2 MiB) the `unread` attackers ask for and never read.
        _, big = await setup_session(owner, victim)
        for i in range(8):
            await owner.call(victim, {"_": "MessageSession", "sessionId": big,
                                      "content": [{"type": "text", "text": f"{i} " + "w" * 120_000}]})
        async def replied() -> bool:
            return len((await owner.call(victim, {"_": "GetSession", "sessionId": big}))["events"]) >= 16

        await until(replied, 30, step=0.05)
        base = rss(pid)
        cpu = cpu_seconds(pid)
        proc = await attackers("together", srv.port, seconds, 4, big)
        # The attackers are under way (the server spends CPU on them) before the honest client
        # is measured.
        await until(lambda: proc.returncode is not None or cpu_seconds(pid) >= cpu + 0.05, 10,
                    what="the server's CPU rising under the attackers")
        latencies: list[float] = []
        n = 0
        while proc.returncode is None:
            t = time.perf_counter()
            r = await honest.call(kp, {"_": "GetSession", "sessionId": session_id, "n": n}, timeout=10)
            latencies.append(time.perf_counter() - t)
            assert r["_"] == "GetSessionResponse", r
            n += 1
            await asyncio.sleep(0.02)   # the honest client's pace
        seen = await finish(proc)
        return latencies, seen, cpu_seconds(pid) - cpu, rss(pid) - base
    finally:
        await honest.close()
        await owner.close()
        srv.kill()


def report(latencies, seen, cpu, grown, seconds) -> None:
    print(f"\n4 x (unread + bombs + pipeline + header) for {seconds:g} s: honest GetSession x{len(latencies)} "
          f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms; server CPU {cpu:.1f} s, RSS +{grown / 2**20:.0f} MiB; {seen}")


async def test_an_honest_client_is_served_while_four_attackers_run_findings_1_to_4(tmp_path):
    latencies, seen, cpu, grown = await honest_under_attack(tmp_path, 3)
    report(latencies, seen, cpu, grown, 3)
    assert seen.get("bombs 401", 0) + seen.get("bombs 400", 0) > 10 and seen.get("header 431", 0) > 10
    assert seen.get("pipeline 429", 0) >= 4   # every flood connection ends there
    # Before the fixes the median alone was seconds (3.5 s under bombs, 3 s under probe floods).
    # On a shared 2-core machine (load average near 10 while this was written) a tail of a few
    # hundred ms is the neighbours'; the slow run below holds the real bound.
    assert percentile(latencies, 0.5) < 0.1 and percentile(latencies, 0.99) < 1.0
    assert grown < 256 << 20


@pytest.mark.slow
async def test_thirty_seconds_of_findings_1_to_4_leave_an_honest_p99_under_50_ms(tmp_path):
    latencies, seen, cpu, grown = await honest_under_attack(tmp_path, 30)
    report(latencies, seen, cpu, grown, 30)
    assert seen.get("unread dropped", 0) >= 4
    assert percentile(latencies, 0.99) < 0.05

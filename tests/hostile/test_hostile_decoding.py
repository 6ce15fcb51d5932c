"""Decode bombs (docs/operations.md "Security"): an envelope whose action holds a million empty
maps costs the server a signature check over its bytes, not a decode, when its signature is
junk; and a bounded count of items when it is signed (by the attacker's own free key); past
`--max-unverified` such frames from one address, its bodies are not read at all. Four
attackers at once (in their own process, tests/hostile_attack.py) leave an honest client's
ListAgents fast. The server is a child process: its CPU time is its own."""
from __future__ import annotations

import asyncio
import time

from seed_agents.protocol.wire.envelope import verify_envelope
from seed_agents.protocol.wire.errors import ProtocolError

from tests.hostile_measure import attackers, cpu_seconds, finish, percentile
from tests.hostile_attack import MAPS, bomb
from tests.procs import ServerProcess
from tests.waiting import until
from tests.wsraw import V2Client, keypair

SECONDS = 2.5


async def test_decode_bombs_cost_a_bounded_slice_of_cpu_and_honest_reads_stay_fast(tmp_path):
    srv = ServerProcess(tmp_path / "srv", extra=["--rate-limit", "100000", "--rate-burst", "100000"]).start()
    pid = srv.proc.pid
    honest = await V2Client.open(srv.url)
    kp = keypair("honest reader")
    try:
        quiet = []
        for i in range(20):
            t = time.perf_counter()
            assert (await honest.call(kp, {"_": "ListAgents", "n": i}))["_"] == "ListAgentsResponse"
            quiet.append(time.perf_counter() - t)
        cpu_before = cpu_seconds(pid)
        proc = await attackers("bombs", srv.port, SECONDS, 4)
        loud = []
        # The attackers are under way once the server spends CPU on them (or they are done).
        await until(lambda: proc.returncode is not None or cpu_seconds(pid) >= cpu_before + 0.05, 10,
                    what="the server's CPU rising under the attackers")
        n = 100
        while proc.returncode is None and len(loud) < 400:
            t = time.perf_counter()
            assert (await honest.call(kp, {"_": "ListAgents", "n": n}))["_"] == "ListAgentsResponse"
            loud.append(time.perf_counter() - t)
            n += 1
            await asyncio.sleep(0.01)   # the honest client's pace
        seen = await finish(proc)
        cpu = cpu_seconds(pid) - cpu_before
        frames = sum(seen.values())
        per_frame = cpu / frames
        print(f"\n4 bombers, {frames} frames of {MAPS} empty maps {seen}: {per_frame * 1000:.1f} ms of server "
              f"CPU a frame (was ~640 ms); honest ListAgents median {percentile(quiet, 0.5) * 1000:.1f} -> "
              f"{percentile(loud, 0.5) * 1000:.1f} ms, p99 {percentile(loud, 0.99) * 1000:.1f} ms")
        # Junk signatures: 401 before any decoding; signed bombs: 400 at the item bound; once
        # the address has sent --max-unverified (100) of them, 429 before the body is read.
        assert {"400", "401"} <= set(seen) <= {"400", "401", "429"}
        assert frames > 20 and per_frame < 0.03
        assert percentile(loud, 0.5) < 0.1   # was a 3.5 s median
    finally:
        await honest.close()
        srv.kill()


def test_a_signed_bomb_is_refused_by_its_item_count_and_a_junk_one_by_its_signature():
    for junk, status, words in ((True, 401, "signature"), (False, 400, "items")):
        frame = bomb(keypair("bomber"), junk_signature=junk)
        t = time.perf_counter()
        try:
            verify_envelope(frame, now_ms=None)
        except ProtocolError as exc:
            assert exc.status == status and words in exc.message
        else:
            raise AssertionError("a bomb verified")
        assert time.perf_counter() - t < 0.05


async def test_an_address_whose_actions_keep_failing_verification_is_refused_before_its_bodies(tmp_path):
    from tests.httpraw import RawHttp, request

    # The junk bucket refills a tenth of --max-unverified a second: a loaded machine slower than
    # that between two of the frames would see an eleventh 401. Its clock runs 1000 times slower.
    srv = ServerProcess(tmp_path / "srv", extra=["--max-unverified", "10", "--rate-clock-speed", "0.001"]).start()
    try:
        frame = request("POST", "/api/message", bomb(keypair("junk address"), junk_signature=True),
                        {"Content-Type": "application/cbor"})
        statuses = []
        raw = await RawHttp.open(srv)
        for _ in range(14):
            await raw.send(frame)
            status, headers, body = await raw.response(timeout=10)
            statuses.append(status)
            if status == 429:
                assert headers["connection"] == "close" and b"failed verification" in body
                break
        raw.close()
        assert statuses == [401] * 10 + [429]
        # The same address's honest WebSocket client is untouched.
        c = await V2Client.open(srv.url)
        assert (await c.call(keypair("honest"), {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
        await c.close()
    finally:
        srv.kill()

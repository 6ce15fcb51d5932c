"""Connections that send and never read (issue 12, finding 1): what each can make the server
hold is bounded in bytes (docs/operations.md "Limits": inbound queue, parser buffer, outbound
queue, write buffer), a peer whose writes make no progress for --write-timeout is dropped (so
keepalive holds when the send buffer is full), the memory comes back after they go, and other
clients are served meanwhile. The server is a child process: its RSS is its own.

Small limits make the figures quick: frames of 64 KiB (4x: 256 KiB closes 1009), an outbound
bound of 256 KiB, a write timeout of 4 s.
"""
from __future__ import annotations

import asyncio
import os
import socket
import time

import httpx

from seed_agents.clients.raw import client_frame, signed_request_frame, tcp_handshake, unique_ts
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.hostile_measure import Peak, dropped, rss, rss_settles_below
from tests.procs import ServerProcess
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

MAX_FRAME = 64 * 1024
OUTBOUND = 256 * 1024
WRITE_TIMEOUT = 4.0
FLAGS = ["--max-frame-bytes", str(MAX_FRAME), "--outbound-queue-bytes", str(OUTBOUND),
         "--write-timeout", str(WRITE_TIMEOUT), "--rate-limit", "100000", "--rate-burst", "100000"]
CONNECTIONS = 20
# The documented bound of one unread connection for these limits (docs/operations.md
# "Limits"): inbound 64 KiB queue + 2 x (256 KiB message + 256 KiB read), outbound 256 KiB +
# one answer (here < 512 KiB) + the write buffer (64 KiB + a 256 KiB batch + 256 KiB of pongs),
# about 2.5 MiB; 4 MiB leaves room for the allocator.
PER_CONNECTION = 4 << 20
# What may stay after they go: measured about 7 MiB for these 20 that the allocator keeps
# even after malloc_trim (server/transport/memtrim.py); see docs/operations.md "Limits".
LEFT_OVER = 12 << 20


async def send_until_stuck(sock: socket.socket, frames, stuck_after: float = 1.0) -> int:
    """Send frames until the server stops taking them (or they run out); bytes sent."""
    loop, sent = asyncio.get_running_loop(), 0
    for frame in frames:
        try:
            await asyncio.wait_for(loop.sock_sendall(sock, frame), stuck_after)
        except (asyncio.TimeoutError, OSError):
            break
        sent += len(frame)
    return sent


def open_connections(port: int) -> float:
    """The server's own count of open WebSocket connections (its /metrics)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("seed_agents_connections{"))


async def wait_connections(port: int, count: int, timeout: float) -> float:
    """The number of open connections once it is `count`, or as it is when `timeout` runs out."""
    try:
        await until(lambda: open_connections(port) == count, timeout, step=0.1)
        return count
    except TimeoutError:
        return open_connections(port)


async def served(client: V2Client, kp, session_id: str, stop: asyncio.Event) -> int:
    """A normal client keeps calling while the attack runs; every call must succeed."""
    n = 0
    while not stop.is_set():
        r = await client.call(kp, {"_": "GetSession", "sessionId": session_id, "n": n}, timeout=10)
        assert r["_"] == "GetSessionResponse", r
        n += 1
        await asyncio.sleep(0.05)   # the normal client's pace
    return n


async def test_twenty_connections_that_send_and_never_read_cost_a_bounded_amount(tmp_path):
    srv = ServerProcess(tmp_path / "srv", extra=FLAGS).start()
    pid = srv.proc.pid
    kp = keypair("reads nothing")
    normal = await V2Client.open(srv.url)
    socks: list[socket.socket] = []
    try:
        _, session_id = await setup_session(normal, kp)
        for i in range(3):   # a session whose GetSession answer is some 300 KB
            r = await normal.call(kp, {"_": "MessageSession", "sessionId": session_id,
                                       "content": [{"type": "text", "text": f"{i} " + "w" * 50_000}]})
            assert r["_"] == "MessageSessionResponse", r
        async def replied() -> bool:   # the three echo replies are written
            return len((await normal.call(kp, {"_": "GetSession", "sessionId": session_id}))["events"]) >= 6

        await until(replied, 20, step=0.05)
        baseline = await rss_settles_below(pid, 0, 0)

        stop = asyncio.Event()
        meanwhile = asyncio.create_task(served(normal, kp, session_id, stop))
        sampler = Peak(pid)
        for _ in range(CONNECTIONS):
            sock, _rest = await tcp_handshake("127.0.0.1", srv.port, rcvbuf=4096, timeout=10)
            socks.append(sock)

        def frames():
            # Answers of ~300 KB each, never read (past the low-water mark the server stops
            # reading), then frames in the 413 range, which wait in the inbound queue.
            for i in range(12):
                env = sign_envelope(kp, {"_": "GetSession", "sessionId": session_id}, ts=unique_ts())
                yield client_frame(signed_request_frame(i + 1, env))
            big = client_frame(dagcbor.encode({"id": 0, "junk": os.urandom(3 * MAX_FRAME)}))
            for _ in range(200):
                yield big

        sent = await asyncio.gather(*(send_until_stuck(s, frames()) for s in socks))
        peak = sampler.stop()
        growth = peak - baseline
        print(f"\n{CONNECTIONS} unread connections sent {sum(sent) / 2**20:.1f} MiB; server RSS "
              f"{baseline / 2**20:.1f} MiB -> peak {peak / 2**20:.1f} MiB "
              f"(+{growth / CONNECTIONS / 2**20:.2f} MiB per connection)")
        assert growth < CONNECTIONS * PER_CONNECTION, (baseline, peak)

        # They are dropped (cut off, or no write progress for the write timeout), unread.
        assert all(await asyncio.gather(*(dropped(s, WRITE_TIMEOUT + 30) for s in socks)))
        stop.set()
        assert await meanwhile > 0   # the normal client was served all along
        # The server let go of them: only the normal client's socket is left.
        assert await wait_connections(srv.port, 1, 10) == 1

        after = await rss_settles_below(pid, baseline + LEFT_OVER, 60)
        print(f"after they went: {after / 2**20:.1f} MiB (baseline {baseline / 2**20:.1f} MiB)")
        assert after <= baseline + LEFT_OVER, (baseline, peak, after)
        r = await normal.call(kp, {"_": "GetSession", "sessionId": session_id})
        assert r["_"] == "GetSessionResponse", r
    finally:
        for s in socks:
            s.close()
        await normal.close()
        srv.kill()


async def test_a_ping_flood_whose_pongs_are_never_read_is_dropped(tmp_path):
    srv = ServerProcess(tmp_path / "srv", extra=FLAGS).start()
    pid = srv.proc.pid
    kp = keypair("pings")
    normal = await V2Client.open(srv.url)
    socks: list[socket.socket] = []
    try:
        _, session_id = await setup_session(normal, kp)
        baseline = rss(pid)
        stop = asyncio.Event()
        meanwhile = asyncio.create_task(served(normal, kp, session_id, stop))
        sampler = Peak(pid)
        for _ in range(4):
            sock, _rest = await tcp_handshake("127.0.0.1", srv.port, rcvbuf=4096, timeout=10)
            socks.append(sock)
        ping = client_frame(b"p" * 125, opcode=0x9)
        burst = ping * 512   # 64 KiB of pings per send
        started = time.monotonic()
        sent = await asyncio.gather(*(send_until_stuck(s, (burst for _ in range(4000))) for s in socks))
        # The pongs pile up unread until the server stops reading; then no progress: dropped.
        assert all(await asyncio.gather(*(dropped(s, WRITE_TIMEOUT + 15) for s in socks)))
        took = time.monotonic() - started
        peak = sampler.stop()
        stop.set()
        assert await meanwhile > 0
        assert await wait_connections(srv.port, 1, 10) == 1
        print(f"\nping flood: {sum(sent) / 2**20:.1f} MiB of pings on {len(socks)} sockets; server RSS "
              f"{baseline / 2**20:.1f} -> peak {peak / 2**20:.1f} MiB; dropped within {took:.1f} s")
        assert peak - baseline < len(socks) * PER_CONNECTION, (baseline, peak)
        after = await rss_settles_below(pid, baseline + LEFT_OVER, 60)
        assert after <= baseline + LEFT_OVER, (baseline, peak, after)
    finally:
        for s in socks:
            s.close()
        await normal.close()
        srv.kill()

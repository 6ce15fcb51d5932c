"""Slow consumers (CONTRACT section 6): a subscriber that stops reading is cut off with close 1013
and a reason naming the last seq it was sent, once its outbound queue passes the bound; it never
slows the other subscribers of the session, server memory stays bounded, and it resumes with
afterSeq from the reason without a gap. The stalled client is a bare TCP socket with a tiny
receive buffer that reads nothing (RawWebSocket below)."""
from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import time

import pytest

from seed_agents.clients.raw import V2, client_frame, parse_server_frame, tcp_handshake
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.server.main import start_server

from tests.conftest import make_config
from tests.waiting import until
from tests.wsraw import V2Client, keypair, rss_bytes, setup_session


class RawWebSocket:
    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self.buffer = bytearray(rest)
        self.eof = False

    @classmethod
    async def open(cls, port: int, *, subprotocol: str | None = V2, rcvbuf: int | None = 4096,
                   path: str = "/agents/ws") -> "RawWebSocket":
        sock, rest = await tcp_handshake("127.0.0.1", port, path=path, subprotocol=subprotocol,
                                         rcvbuf=rcvbuf, timeout=5)
        return cls(sock, rest)

    @property
    def local_port(self) -> int:
        return self.sock.getsockname()[1]

    async def send(self, payload: bytes, opcode: int = 0x2) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, client_frame(payload, opcode))

    async def _fill(self, timeout: float) -> bool:
        chunk = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(self.sock, 1 << 16), timeout)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    async def frame(self, timeout: float = 10.0) -> tuple[int, bytes]:
        """(opcode, payload) of the next server frame (unmasked, unfragmented)."""
        while True:
            parsed = self._parse()
            if parsed is not None:
                return parsed
            if not await self._fill(timeout):
                raise EOFError("connection closed by the server")

    def _parse(self) -> tuple[int, bytes] | None:
        parsed = parse_server_frame(self.buffer)
        if parsed is None:
            return None
        opcode, payload, end = parsed
        del self.buffer[:end]
        return opcode, payload

    async def until_close(self, timeout: float = 10.0) -> tuple[list[bytes], int, str]:
        """Read data frames until the close frame: (data payloads, close code, close reason).
        The close is not answered (see `answer_close`)."""
        frames = []
        while True:
            opcode, payload = await self.frame(timeout)
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                return frames, code, payload[2:].decode()
            if opcode in (0x1, 0x2):
                frames.append(payload)

    async def answer_close(self, code: int = 1000) -> None:
        await self.send(struct.pack("!H", code), opcode=0x8)

    async def wait_eof(self, timeout: float) -> None:
        """Read (and drop) until the server closes the TCP connection."""
        async with asyncio.timeout(timeout):
            while await self._fill(timeout):
                self.buffer.clear()

    def close(self) -> None:
        self.sock.close()


# -- helpers ---------------------------------------------------------------------------------


def server_side(srv, raw: RawWebSocket):
    """The server's Connection for a raw client socket (in-process server)."""
    for conn in srv.app.connections:
        if conn.ws.remote_address[1] == raw.local_port:
            return conn
    raise LookupError("no such connection")


def shrink_server_send_buffer(srv, raw: RawWebSocket, size: int = 8192) -> None:
    """Loopback autotunes the server's send buffer up to megabytes; a small fixed one makes the
    stalled socket's backlog reach the outbound queue after a few hundred kB, not many MB."""
    sock = server_side(srv, raw).ws.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


async def subscribe_raw(raw: RawWebSocket, kp, key: str, *, v2: bool = True) -> None:
    action = {"_": "Subscribe", "key": key}
    if v2:
        await raw.send(dagcbor.encode({"id": 1, "envelope": build_envelope(kp, action)}))
        opcode, payload = await raw.frame()
        assert opcode == 0x2 and dagcbor.decode(payload)["response"]["_"] == "SubscribeResponse"
        return
    opcode, payload = await raw.frame()
    assert opcode == 0x1 and json.loads(payload)["_"] == "connected"
    await raw.send(dagcbor.encode(build_envelope(kp, action)))
    opcode, payload = await raw.frame()
    assert opcode == 0x1 and json.loads(payload)["_"] == "subscribed", payload


def decode_frame(payload: bytes, v2: bool) -> dict:
    return dagcbor.decode(payload) if v2 else json.loads(payload)


def append_seqs(value: dict) -> list[int]:
    if value.get("_") != "append":
        return []
    events = value["events"] if "events" in value else [value["event"]]
    return [e["seq"] for e in events]


class Follower:
    """A normal subscriber: reads everything and records the seqs, in order."""

    def __init__(self, client: V2Client) -> None:
        self.client = client
        self.seqs: list[int] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            value = await self.client.events.get()
            self.seqs.extend(append_seqs(value))


# -- tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("framing", ["v2", "v1"])
async def test_stalled_subscriber_is_cut_off_others_get_everything_and_it_resumes(tmp_path, framing):
    v2 = framing == "v2"
    queue_bound = 64 * 1024
    srv = await start_server(make_config(tmp_path, outbound_queue_bytes=queue_bound,
                                         slow_close_timeout=10.0, rate_per_second=1000.0,
                                         rate_burst=1000))
    a = keypair("A")
    writer = await V2Client.open(srv.url)
    followers: list[Follower] = []
    raw = None
    try:
        _, sid = await setup_session(writer, a)
        key = f"sessions/{sid}"
        clients = await asyncio.gather(*[V2Client.open(srv.url) for _ in range(50)])
        for i, c in enumerate(clients):
            r = await c.call(a, {"_": "Subscribe", "key": key, "n": i})
            assert r["_"] == "SubscribeResponse", r
            followers.append(Follower(c))
        raw = await RawWebSocket.open(srv.port, subprotocol=V2 if v2 else None)
        await subscribe_raw(raw, a, key, v2=v2)
        stalled_conn = server_side(srv, raw)
        shrink_server_send_buffer(srv, raw)
        # from here on the stalled socket reads nothing

        rss_before = peak = rss_bytes()
        queued_peak = 0

        async def sample():
            nonlocal peak, queued_peak
            while True:
                peak = max(peak, rss_bytes())
                queued_peak = max(queued_peak, stalled_conn.outbound.queued_bytes)
                await asyncio.sleep(0.005)   # the sampling interval: a measurement, not a wait

        sampler = asyncio.create_task(sample())
        turns, text = 24, "y" * 12_000
        latencies = []
        for i in range(turns):
            t0 = time.perf_counter()
            r = await writer.call(a, {"_": "MessageSession", "sessionId": sid,
                                      "content": [{"type": "text", "text": f"turn {i} {text}"}]})
            latencies.append(time.perf_counter() - t0)
            assert r["_"] == "MessageSessionResponse", r
        total = 2 * turns   # a user and an assistant event per turn
        await until(lambda: all(len(f.seqs) >= total for f in followers), 30, what=f"every follower at {total} events")
        sampler.cancel()
        # every normal subscriber got every event exactly once, in order
        for f in followers:
            assert f.seqs == list(range(1, total + 1)), f.seqs[:10]
        # the stalled one was cut off, and memory stayed bounded
        assert stalled_conn.outbound.closed
        assert stalled_conn.outbound.queued_bytes == 0
        assert peak - rss_before < 100 * 1024 * 1024, (rss_before, peak)
        assert queued_peak <= queue_bound, queued_peak   # the bound holds for live events
        print(f"\nstalled {framing}: RSS +{(peak - rss_before) / 2**20:.1f} MiB, stalled queue peak "
              f"{queued_peak} B (bound {queue_bound})")
        assert max(latencies) < 5.0, latencies

        # it starts reading again: what was written before the cut, then 1013 with the reason
        frames, code, reason = await raw.until_close()
        got = [s for p in frames for s in append_seqs(decode_frame(p, v2))]
        assert code == 1013, (code, reason)
        m = re.search(rf"{re.escape(key)} last seq (\d+)", reason)
        assert m, reason
        last = int(m.group(1))
        assert got == list(range(1, len(got) + 1)) and 0 < len(got) < total
        assert last == got[-1], (last, got[-3:])   # the reason names the last seq it was sent
        await raw.answer_close()
        raw.close()
        raw = None

        # resume with afterSeq from the reason: every later event, no gap, no duplicate
        resumed = await V2Client.open(srv.url)
        r = await resumed.call(a, {"_": "Subscribe", "key": key, "afterSeq": last})
        assert r["_"] == "SubscribeResponse"
        seqs = []
        async with asyncio.timeout(10):
            while True:
                value = await resumed.event()
                seqs.extend(append_seqs(value))
                if value["_"] == "replayed":
                    assert value["seq"] == total
                    break
        assert got + seqs == list(range(1, total + 1))
        await resumed.close()
    finally:
        if raw is not None:
            raw.close()
        for f in followers:
            f.task.cancel()
            await f.client.close()
        await writer.close()
        await srv.stop()


async def test_cut_off_waits_for_the_closing_handshake_longer_than_the_websocket_default(tmp_path):
    """The server keeps the TCP connection of a cut-off consumer for slow_close_timeout (the
    contract says at least 30 s; 7 s here), so a client that resumes reading late still finds the
    reason; websockets' own close timeout (5 s) must not cut that short."""
    srv = await start_server(make_config(tmp_path, outbound_queue_bytes=16 * 1024, slow_close_timeout=7.0))
    a = keypair("A")
    writer = await V2Client.open(srv.url)
    raw = await RawWebSocket.open(srv.port)
    try:
        _, sid = await setup_session(writer, a)
        key = f"sessions/{sid}"
        await subscribe_raw(raw, a, key)
        conn = server_side(srv, raw)
        shrink_server_send_buffer(srv, raw)
        for i in range(40):
            await writer.call(a, {"_": "MessageSession", "sessionId": sid,
                                  "content": [{"type": "text", "text": f"{i} " + "z" * 8000}]})
            if conn.outbound.closed:
                break
        assert conn.outbound.closed
        cut = time.monotonic()
        _, code, reason = await raw.until_close()
        assert code == 1013 and f"{key} last seq" in reason
        # the close is not answered: the server waits for it until slow_close_timeout
        await raw.wait_eof(15)   # and then it does close (bounded by this deadline)
        waited = time.monotonic() - cut
        assert waited > 6.0, waited   # past websockets' own 5 s; no upper window a busy machine could miss
    finally:
        raw.close()
        await writer.close()
        await srv.stop()

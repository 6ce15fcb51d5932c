"""HTTP actions (what the Seed desktop and web apps use): GetSession (20-event session, ~12 KB
response) and CreateSession (with a clientRequestId) as keep-alive `POST /api/message` at
concurrency 1, 8 and 64, and MessageSession's accept (each connection writes to its own session
of the echo agent, with a clientMessageId; timed to the answer: the user event and the queued
run durable) at 8 and 64, with the ratio to raw Ed25519 verifies/s on the server's core; and
the per-request cost of the two HTTP/1.1 parsers considered (h11, httptools), which chose httptools.

The MessageSession runs start a turn per message, which runs after the answer: after each run
the load waits (bounded) until the server is idle again, so the turns of one run do not slow
the next, and the server's CPU per message in `cpu` counts the accept only (the wait is outside
the meter). Its ratio is to the raw verify rate of the CreateSession input (a signing input of
nearly the same size).

The load opens `c` keep-alive connections (an HTTP/1.1 connection carries one request at a
time), pre-signs every envelope of a run before timing it (each distinct, as in bench.rpc), and
keeps each connection busy (closed loop). Its client is a minimal raw one (a prebuilt request,
a response read by Content-Length), so the load process does not measure itself.
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable

from seed_agents.clients.raw import now_ms

from bench import dbsetup
from bench.conditions import SERVER_CPU
from bench.load import keypair
from bench.meters import CpuMeter
from bench.processes import Server, profile_window, run_load
from bench.rpc import CONCURRENCY, EVENT_CHARS, _actions, _sign, cell, run_row, sizes
from bench.stats import summary


class KeepAlive:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer = reader, writer
        self.head = (f"POST /api/message HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/cbor\r\n"
                     "Accept: application/cbor\r\nContent-Length: ").encode()

    @classmethod
    async def open(cls, host: str, port: int) -> "KeepAlive":
        reader, writer = await asyncio.open_connection(host, port)
        writer.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, f"{host}:{port}")

    async def post(self, body: bytes) -> tuple[int, bytes]:
        self.writer.write(b"%s%d\r\n\r\n%s" % (self.head, len(body), body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        start = head.find(b"Content-Length: ") + 16
        length = int(head[start:head.find(b"\r\n", start)])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def _lanes(lanes: list[tuple[KeepAlive, Iterable[bytes]]], timeout: float) -> dict:
    """Each connection posts the bodies of its lane one at a time (closed loop) until they run
    out or the deadline passes; lanes may share one iterator (`_closed_loop`)."""
    latencies: list[float] = []
    errors = 0
    first_error = None
    deadline = time.perf_counter() + timeout

    async def lane(conn: KeepAlive, bodies: Iterable[bytes]) -> None:
        nonlocal errors, first_error
        for body in bodies:
            if time.perf_counter() > deadline:
                return
            t0 = time.perf_counter()
            status, answer = await conn.post(body)
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                errors += 1
                if first_error is None:
                    from seed_agents.protocol.wire.dagcbor import decode

                    first_error = f"{status} {decode(answer)!r}"[:300]

    started = time.perf_counter()
    await asyncio.gather(*(lane(c, b) for c, b in lanes))
    return {"seconds": time.perf_counter() - started, "latencies": latencies, "errors": errors,
            "first_error": first_error}


async def _closed_loop(conns: list[KeepAlive], bodies: list[bytes], timeout: float) -> dict:
    """The connections take the bodies from one queue, each posting the next as its answer comes."""
    it = iter(bodies)
    return await _lanes([(c, it) for c in conns], timeout)


MESSAGE_CONCURRENCY = (8, 64)


async def _accepts(conns: list[KeepAlive], per_conn: list[list[bytes]], timeout: float) -> dict:
    """Each connection posts its own bodies one at a time (closed loop)."""
    return await _lanes(list(zip(conns, per_conn)), timeout)


async def _message_bodies(kp, conns: list[KeepAlive], agent_id: str, sessions: list[str], count: int,
                          counter: list[int]) -> list[list[bytes]]:
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    per = max(1, count // len(conns))
    out = []
    for sid in sessions:
        bodies = []
        for _ in range(per):
            counter[0] += 1
            bodies.append(sign_envelope(kp, {"_": "MessageSession", "sessionId": sid,
                                             "content": [{"type": "text", "text": f"message {counter[0]}"}],
                                             "clientMessageId": f"bench-m{counter[0]}"}, ts=unique_ts()))
        out.append(bodies)
    return out


async def _settle(pid: int | None, cap: float = 30.0) -> None:
    """Until the server's turns are done: under 2 ms of its CPU in 50 ms (bounded)."""
    from bench.sqlite_ab import server_cpu_ns

    if pid is None:
        return
    deadline = time.monotonic() + cap
    last = server_cpu_ns(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        now = server_cpu_ns(pid)
        if now - last < 2_000_000:
            return
        last = now


async def _message_runs(kp, host: str, port: int, agent_id: str, quick: bool, pid: int | None, runs: int,
                        out: dict) -> None:
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.dagcbor import decode
    from seed_agents.protocol.wire.envelope import sign_envelope

    counter = [0]
    for c in MESSAGE_CONCURRENCY:
        n = {8: 200, 64: 384}[c] if quick else {8: 1000, 64: 2000}[c]
        conns = [await KeepAlive.open(host, port) for _ in range(c)]
        sessions = []
        for conn in conns:   # a session of its own per connection, made before anything is timed
            status, answer = await conn.post(sign_envelope(kp, {"_": "CreateSession", "agentId": agent_id},
                                                           ts=unique_ts()))
            if status != 200:
                raise RuntimeError(f"CreateSession for the MessageSession runs: {status} {decode(answer)!r}")
            sessions.append(decode(answer)["sessionId"])
        rows = []
        for r in range(runs + 1):  # run 0 is the warm-up
            bodies = await _message_bodies(kp, conns, agent_id, sessions, n // 4 if r == 0 else n, counter)
            if r == 0:
                await _accepts(conns, bodies, timeout=120)
                await _settle(pid)
                continue
            with profile_window(f"http_MessageSession_c{c}"), CpuMeter(pid) as cpu:
                res = await _accepts(conns, bodies, timeout=120)
            await _settle(pid)
            rows.append(run_row(res, cpu.result))
        for conn in conns:
            conn.close()
        out[f"MessageSession_c{c}"] = cell({"concurrency": c, "connections": c, "requests_per_run": n}, rows)


async def load(host: str, port: int, label: str, session_id: str, agent_id: str, quick: bool,
               pid: int | None = None) -> dict:
    kp = keypair(label)
    runs, per_run = sizes(quick)
    out: dict = {}
    counters = {"GetSession": [0], "CreateSession": [0]}
    last_ts = 0
    for kind in ("GetSession", "CreateSession"):
        for c in CONCURRENCY:
            conns = [await KeepAlive.open(host, port) for _ in range(c)]
            n = per_run[c]
            rows = []
            for r in range(runs + 1):  # run 0 is the warm-up
                count = n // 4 if r == 0 else n
                ts = max(now_ms(), last_ts + 2)
                bodies = _sign(kp, _actions(kind, count, session_id, agent_id, counters[kind]), ts)
                last_ts = ts + count // 9979 + 1
                if r == 0:
                    await _closed_loop(conns, bodies, timeout=120)
                    continue
                with profile_window(f"http_{kind}_c{c}"), CpuMeter(pid) as cpu:
                    res = await _closed_loop(conns, bodies, timeout=120)
                rows.append(run_row(res, cpu.result))
            for conn in conns:
                conn.close()
            out[f"{kind}_c{c}"] = cell({"concurrency": c, "connections": c, "requests_per_run": n}, rows)
    await _message_runs(kp, host, port, agent_id, quick, pid, runs, out)
    return out


def parsers(quick: bool) -> dict:
    """Microseconds per request to parse a typical desktop POST (11 headers, a 265-byte body) and
    build its answer's head, with h11 and with httptools, on one core (best of rounds)."""
    import h11
    import httptools

    body = b"x" * 265
    request = (b"POST /api/message HTTP/1.1\r\nHost: 127.0.0.1:3050\r\nContent-Type: application/cbor\r\n"
               b"Accept: application/cbor\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Chrome/120\r\n"
               b"Accept-Encoding: gzip, deflate\r\nAccept-Language: en\r\nConnection: keep-alive\r\n"
               b"Origin: http://localhost:5173\r\nSec-Fetch-Mode: cors\r\nContent-Length: 265\r\n\r\n") + body
    answer_headers = [("Content-Type", "application/cbor"), ("Content-Length", "300"),
                      ("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                      ("Access-Control-Allow-Headers", "Content-Type, Accept"), ("Connection", "keep-alive")]
    n, rounds = (2000, 3) if quick else (5000, 7)

    def with_h11() -> None:
        conn = h11.Connection(h11.SERVER)
        for _ in range(n):
            conn.receive_data(request)
            while type(conn.next_event()) is not h11.EndOfMessage:
                pass
            conn.send(h11.Response(status_code=200, headers=answer_headers))
            conn.send(h11.Data(data=b"y" * 300))
            conn.send(h11.EndOfMessage())
            conn.start_next_cycle()

    class Sink:
        def __init__(self) -> None:
            self.headers: list = []
            self.body: list = []

        def on_url(self, url):
            self.url = url

        def on_header(self, name, value):
            self.headers.append((name, value))

        def on_body(self, data):
            self.body.append(data)

    def with_httptools() -> None:
        sink = Sink()
        parser = httptools.HttpRequestParser(sink)
        for _ in range(n):
            sink.headers, sink.body = [], []
            parser.feed_data(request)
            parser.get_method()
            parser.should_keep_alive()
            b"".join((b"HTTP/1.1 200 OK\r\n", *(f"{k}: {v}\r\n".encode() for k, v in answer_headers),
                      b"\r\n", b"y" * 300))

    out = {}
    for name, fn in (("h11", with_h11), ("httptools", with_httptools)):
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            best = min(best, (time.perf_counter() - t) / n * 1e6)
        out[name] = {"us_per_request": round(best, 2)}
    out["h11_over_httptools"] = round(out["h11"]["us_per_request"] / out["httptools"]["us_per_request"], 1)
    return out


def run(quick: bool = False) -> dict:
    label = "http"
    kp = keypair(label)
    data_dir = tempfile.mkdtemp(prefix="bench-http-")
    try:
        built = dbsetup.build(data_dir, kp.account_id, {"get": (20, EVENT_CHARS)})
        session_id, agent_id = built["sessions"]["get"], built["agentId"]
        params = {"label": label, "session_id": session_id, "agent_id": agent_id, "quick": quick}
        # Turns queue behind the messages without the per-account cap of runs in flight (its 429
        # is measured elsewhere, bench/deep_queue.py).
        with Server("http", data_dir=data_dir, extra=["--max-runs-in-flight", "1000000"]) as srv:
            figures = run_load("bench.http:load", {"host": "127.0.0.1", "port": srv.port, "pid": srv.pid,
                                                   **params}, timeout=600)
            figures["server_rss_kb_end"] = srv.rss_kb()
        raw = run_load("bench.rpc:raw_verify", params, cpu=SERVER_CPU, timeout=120)
        figures["parsers"] = run_load("bench.http:parsers", {"quick": quick}, cpu=SERVER_CPU, timeout=120)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    figures["raw_verify"] = raw
    for kind, concurrency, raw_kind in (("GetSession", CONCURRENCY, "GetSession"),
                                        ("CreateSession", CONCURRENCY, "CreateSession"),
                                        ("MessageSession", MESSAGE_CONCURRENCY, "CreateSession")):
        limit = raw[raw_kind]["raw_verifies_per_s"]
        for c in concurrency:
            row = figures[f"{kind}_c{c}"]
            row["ratio_to_raw_verify"] = summary([v / limit for v in row["actions_per_s"]["runs"]], 4)
    return figures

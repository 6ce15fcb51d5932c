"""Hostile HTTP clients, round three (docs/operations.md "Security"), each over a real socket:
answers nobody reads, pipelined floods of GET probes, heads that never end, a body smuggled
behind an Upgrade, `Expect: 100-continue` on a refused head, duplicate Origins, one address
holding every connection. The figures (RSS, CPU, latency) are asserted as bounds; the ones that
need the server's own RSS and CPU run it as a child process."""
from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.server.transport.httpconn import CONN_PROBE_BURST, CONN_PROBE_RATE

from tests.clocks import StoppedClock
from tests.conftest import make_config
from tests.hostile_measure import Peak, cpu_seconds, dropped, raw_socket, rss, rss_settles_below
from tests.httpraw import RawHttp, base_url, request
from tests.procs import ServerProcess
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

CBOR = {"Content-Type": "application/cbor"}


@pytest.fixture
async def running(tmp_path, request):
    from seed_agents.server.main import start_server

    server = await start_server(make_config(tmp_path, **getattr(request, "param", {})))
    try:
        yield server
    finally:
        await server.stop()


async def big_session(client: V2Client, kp, messages: int, size: int) -> tuple[str, int]:
    """A session whose GetSession answer is about `messages` x 2 x `size` bytes (echo replies)."""
    _, session_id = await setup_session(client, kp)
    for i in range(messages):
        r = await client.call(kp, {"_": "MessageSession", "sessionId": session_id,
                                   "content": [{"type": "text", "text": f"{i} " + "w" * size}]})
        assert r["_"] == "MessageSessionResponse", r
    async def replied() -> dict | None:
        r = await client.call(kp, {"_": "GetSession", "sessionId": session_id})
        return r if len(r["events"]) >= 2 * messages else None

    r = await until(replied, 30, step=0.05, what=f"{2 * messages} events")
    return session_id, len(dagcbor.encode(r))


async def http_connections(port: int) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("seed_agents_http_connections "))


# -- 1. answers nobody reads ---------------------------------------------------------------------
async def test_unread_http_answers_are_dropped_after_the_write_timeout_and_the_memory_returns(tmp_path):
    write_timeout = 2.0
    srv = ServerProcess(tmp_path / "srv", extra=[
        "--write-timeout", str(write_timeout), "--http-idle-timeout", "2",
        "--rate-limit", "100000", "--rate-burst", "100000"]).start()
    pid = srv.proc.pid
    kp = keypair("unread http")
    client = await V2Client.open(srv.url)
    socks: list[socket.socket] = []
    try:
        session_id, answer = await big_session(client, kp, messages=14, size=120_000)
        assert answer > 3 << 20
        baseline = rss(pid)
        peak = Peak(pid)
        loop = asyncio.get_running_loop()
        connections = 30
        for _ in range(connections):
            sock = raw_socket(srv.port)
            body = sign_envelope(kp, {"_": "GetSession", "sessionId": session_id}, ts=unique_ts())
            await loop.sock_sendall(sock, request("POST", "/api/message", body, CBOR))
            socks.append(sock)
        started = time.monotonic()
        # The idle timer no longer re-arms behind an answer: no progress for the write timeout
        # and the connection is dropped (reset: the kernel lets go of the answer too).
        assert all(await asyncio.gather(*(dropped(s, write_timeout + 15) for s in socks)))
        took = time.monotonic() - started
        assert await http_connections(srv.port) == 1   # the scrape's own
        top = peak.stop()
        # Meanwhile and after, an honest client is served.
        r = await client.call(kp, {"_": "GetSession", "sessionId": session_id})
        assert r["_"] == "GetSessionResponse"
        after = await rss_settles_below(pid, baseline + (16 << 20), 30)
        print(f"\n{connections} unread {answer / 2**20:.1f} MiB answers: dropped within {took:.1f} s; "
              f"RSS {baseline / 2**20:.0f} -> peak {top / 2**20:.0f} -> {after / 2**20:.0f} MiB")
        assert took < 2 * write_timeout + 8
        # Each held at most its answer (plus the allocator's slack) while it waited.
        assert top - baseline < connections * (answer + (1 << 20)) + (32 << 20)
        assert after <= baseline + (16 << 20), (baseline, top, after)
    finally:
        for s in socks:
            s.close()
        await client.close()
        srv.kill()


# -- 3. pipelined GET probes ------------------------------------------------------------------------
async def test_a_pipelined_flood_of_probes_meets_its_rate_and_costs_little_cpu(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    pid = srv.proc.pid
    try:
        flood = request("GET", "/metrics") * 4000 + request("GET", "/api/health") * 4000
        cpu_before, started = cpu_seconds(pid), time.monotonic()
        raws = [await RawHttp.open(srv) for _ in range(2)]
        latencies = []
        async with httpx.AsyncClient() as http:
            for raw in raws:
                raw.writer.write(flood)
            for _ in range(20):   # an honest monitor meanwhile, one probe at a time
                t = time.perf_counter()
                r = await http.get(f"http://127.0.0.1:{srv.port}/api/health")
                latencies.append(time.perf_counter() - t)
                assert r.status_code in (200, 429)
        statuses = []
        for raw in raws:
            while True:
                try:
                    status, headers, _body = await raw.response(timeout=10)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                statuses.append(status)
                if status == 429:
                    assert headers["connection"] == "close" and headers["retry-after"] == "1"
                    break
            raw.close()
        cpu = cpu_seconds(pid) - cpu_before
        print(f"\n2 x 8,000 pipelined probes: {statuses.count(200)} answered 200, then 429 and closed; "
              f"server CPU {cpu:.3f} s; honest probe max {max(latencies) * 1000:.1f} ms")
        assert statuses.count(429) == 2
        # each connection's burst, and what its bucket refilled meanwhile
        assert statuses.count(200) <= 2 * (CONN_PROBE_BURST + CONN_PROBE_RATE * (time.monotonic() - started))
        assert cpu < 0.5
        assert max(latencies) < 0.5
    finally:
        srv.kill()


# The buckets' clock stands still (tests/clocks.py): a loaded machine that sends the probes slowly
# would otherwise see the bucket refill meanwhile.
@pytest.mark.parametrize("running", [{"probe_rate": 10.0, "rate_clock": StoppedClock()}], indirect=True)
async def test_probes_are_limited_per_address_across_connections(running):
    # Ten connections, each within its own burst, together past the address's 2 x 10.
    statuses = []
    for _ in range(10):
        raw = await RawHttp.open(running)
        await raw.send(request("GET", "/api/version") * 5)
        for _ in range(5):
            try:
                status, _h, _b = await raw.response(timeout=5)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            statuses.append(status)
            if status == 429:
                break
        raw.close()
    assert 20 <= statuses.count(200) <= 25 and 429 in statuses
    assert statuses.count(200) == 20, statuses   # no time passed on the buckets' clock: the burst
    # An Upgrade header does not make a probe free.
    raw = await RawHttp.open(running)
    await raw.send(request("GET", "/api/health", headers={"Connection": "Upgrade", "Upgrade": "h2c"}))
    assert (await raw.response())[0] == 429
    raw.close()


@pytest.mark.parametrize("running", [{"probe_rate": 10.0, "rate_clock": StoppedClock()}], indirect=True)
async def test_a_metrics_render_costs_its_address_four_probes(running):
    # /metrics renders the whole registry on the event loop (about fifty health answers' CPU):
    # a pipelined flood of it from one address gets a quarter of what version probes get (20-25
    # of them in the test above, on the same bucket of 2 x 10).
    raw = await RawHttp.open(running)
    await raw.send(request("GET", "/metrics") * 40)
    statuses = []
    for _ in range(40):
        try:
            status, _h, _b = await raw.response(timeout=5)
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        statuses.append(status)
        if status == 429:
            break
    raw.close()
    # The burst of 20 tokens pays for 5 renders (and on a moving clock, what refilled meanwhile
    # for one or two more; this one stands still).
    assert statuses[-1] == 429 and 5 <= statuses.count(200) <= 7, statuses
    assert statuses.count(200) == 5, statuses


async def test_pipelined_actions_are_all_answered_in_order_under_the_pipeline_bound(running):
    # 200 actions in one write: more than the 16 parsed ahead, so most wait unparsed, yet
    # every one is answered, in order, on the one connection.
    a = keypair("pipeline")
    bodies = [sign_envelope(a, {"_": "ListAgents", "n": i}) for i in range(200)]
    raw = await RawHttp.open(running)
    await raw.send(b"".join(request("POST", "/api/message", b, CBOR) for b in bodies))
    answers = [await raw.response(timeout=10) for _ in bodies]
    assert [(s, dagcbor.decode(b)["_"]) for s, _h, b in answers] == [(200, "ListAgentsResponse")] * 200
    raw.close()


# -- 4. heads that never end ---------------------------------------------------------------------------
async def test_a_header_that_never_ends_is_431_at_once(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    pid = srv.proc.pid
    try:
        cpu_before, baseline = cpu_seconds(pid), rss(pid)
        raws = []
        for _ in range(6):
            raw = await RawHttp.open(srv)
            await raw.send(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Long: ")
            raws.append(raw)
        t = time.monotonic()
        for raw in raws:
            for _ in range(40):   # 40 KiB of one header value, in 1 KiB pieces
                try:
                    await raw.send(b"a" * 1024)
                except (ConnectionError, OSError):
                    break
        for raw in raws:
            status, headers, _body = await raw.response(timeout=3)
            assert status == 431 and headers["connection"] == "close"
            raw.close()
        took = time.monotonic() - t
        # Inside a chunked trailer too.
        raw = await RawHttp.open(srv)
        await raw.send(b"POST /api/message HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n1\r\n\xa0\r\n0\r\nX-Trailer: ")
        for _ in range(40):
            try:
                await raw.send(b"b" * 1024)
            except (ConnectionError, OSError):
                break
        status, _headers, body = await raw.response(timeout=3)
        assert status == 431 and b"trailers" in body
        raw.close()
        cpu, grown = cpu_seconds(pid) - cpu_before, rss(pid) - baseline
        print(f"\n6 endless headers + 1 endless trailer: 431 within {took:.2f} s; server CPU {cpu:.3f} s, "
              f"RSS +{grown / 2**20:.1f} MiB")
        assert took < 2 and cpu < 0.5 and grown < 16 << 20
    finally:
        srv.kill()


# -- 5. a body behind an Upgrade ------------------------------------------------------------------------
async def test_an_upgrade_with_a_body_elsewhere_is_400_and_its_body_never_runs(running):
    a = keypair("smuggler")
    inner = request("POST", "/api/message", sign_envelope(a, {"_": "CreateAgent", "definition": {
        "name": "smuggled", "systemPrompt": "", "modelProvider": "echo", "model": "m"}}), CBOR)
    for framing in ("length", "chunked"):
        raw = await RawHttp.open(running)
        head = {"Connection": "Upgrade", "Upgrade": "websocket"}
        if framing == "length":
            await raw.send(request("GET", "/api/health", inner, head))
        else:
            head["Transfer-Encoding"] = "chunked"
            await raw.send(request("GET", "/api/health", headers=head)
                           + b"%x\r\n" % len(inner) + inner + b"\r\n0\r\n\r\n")
        status, headers, body = await raw.response()
        assert status == 400 and b"upgrade" in body and headers["connection"] == "close"
        assert await raw.closed(timeout=5)
        raw.close()
    async with httpx.AsyncClient() as http:
        r = await http.post(base_url(running) + "/api/message", headers=CBOR,
                            content=sign_envelope(a, {"_": "ListAgents"}))
        assert dagcbor.decode(r.content)["agents"] == []


# -- 15. Expect: 100-continue on a refused head ---------------------------------------------------------
async def test_expect_continue_on_a_refused_head_is_answered_at_once(running):
    raw = await RawHttp.open(running)
    t = time.monotonic()
    await raw.send(b"POST /api/message HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                   b"Content-Length: 500\r\nExpect: 100-continue\r\n\r\n")
    status, headers, _body = await raw.response(timeout=3)
    assert status == 415 and headers["connection"] == "close" and time.monotonic() - t < 1
    raw.close()


# -- 14. duplicate Origin headers -----------------------------------------------------------------------
async def test_duplicate_origins_are_400_over_http_and_on_the_upgrade(running):
    body = sign_envelope(keypair("origins"), {"_": "ListAgents"})
    raw = await RawHttp.open(running)
    await raw.send(b"POST /api/message HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
                   b"Origin: https://a.example\r\nOrigin: https://b.example\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
    status, _h, answer = await raw.response()
    assert status == 400 and b"Origin" in answer
    raw.close()
    raw = await RawHttp.open(running)
    await raw.send(request("GET", "/agents/ws", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Origin": "https://a.example"})
        .replace(b"\r\n\r\n", b"\r\nOrigin: https://b.example\r\n\r\n"))
    status, _h, _b = await raw.response()
    assert status == 400
    raw.close()


# -- 8. sockets that hold slots -----------------------------------------------------------------------
@pytest.mark.parametrize("running", [{"connections_per_address": 5}], indirect=True)
async def test_one_address_holds_at_most_its_connections(running):
    raws = [await RawHttp.open(running) for _ in range(5)]
    await until(lambda: running.ws_server.addresses.open_from("127.0.0.1") == 5, 5, what="five connections counted")
    extra = await RawHttp.open(running)
    status, _h, body = await extra.response()
    assert status == 503 and b"this address" in body
    extra.close()
    raws.pop().close()
    async def served() -> bool:
        raw = await RawHttp.open(running)
        await raw.send(request("GET", "/api/version"))
        status, _h, _b = await raw.response()
        raw.close()
        return status == 200

    await until(served, 5, step=0.05, what="the slot back")   # its slot comes back once it has gone
    for raw in raws:
        raw.close()


@pytest.mark.parametrize("running", [{"first_action_timeout": 1.0}], indirect=True)
async def test_a_socket_with_no_verified_action_is_closed_after_the_deadline(running):
    idle = await V2Client.open(running.url)
    acting = await V2Client.open(running.url)
    kp = keypair("acts")
    assert (await acting.call(kp, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    t = time.monotonic()
    await asyncio.wait_for(idle.ws.wait_closed(), 5)
    assert idle.ws.close_code == 1008 and "no verified action" in idle.ws.close_reason
    assert time.monotonic() - t < 3
    await asyncio.sleep(0.5)   # time passes past the deadline: the acting socket must outlive it
    assert (await acting.call(kp, {"_": "ListAgents", "n": 2}))["_"] == "ListAgentsResponse"
    await acting.close()


async def test_what_arrives_after_a_final_answer_is_dropped_not_kept(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    pid = srv.proc.pid
    try:
        base = rss(pid)
        peak = Peak(pid)
        raw = await RawHttp.open(srv)
        await raw.send(b"POST /api/message HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
                       b"Content-Length: %d\r\n\r\n" % (1 << 30))
        status, _h, _b = await raw.response(timeout=5)
        assert status == 413
        # The client goes on sending its body while the server lingers before closing.
        sent, chunk = 0, b"\0" * (1 << 20)
        try:
            async with asyncio.timeout(1.5):
                while sent < 256 << 20:
                    await raw.send(chunk)
                    sent += len(chunk)
        except (TimeoutError, ConnectionError, OSError):
            pass
        top = peak.stop()
        raw.close()
        print(f"\n{sent >> 20} MiB sent after a 413: server RSS +{(top - base) / 2**20:.1f} MiB at most")
        assert top - base < 16 << 20
    finally:
        srv.kill()

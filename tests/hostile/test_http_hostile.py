"""The HTTP endpoint against bad and hostile clients: every refusal has its status, nothing is
read that should not be, a stalled client is dropped, and everyone else is served meanwhile."""
from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.conftest import make_config, running_server
from tests.httpraw import CBOR_HEADERS, CORS, RawHttp, act, assert_cors, base_url, post, request
from tests.waiting import until
from tests.wsraw import V1, V2Client, keypair


@pytest.fixture
async def quick_server(tmp_path):
    """Short HTTP bounds, and limits high enough that 1,000 requests are all served."""
    async with running_server(make_config(tmp_path, http_header_timeout=1.0, http_body_timeout=1.0,
                                          rate_per_second=100_000.0, rate_burst=100_000)) as running:
        yield running


async def served(server) -> bool:
    async with httpx.AsyncClient() as http:
        status, value = await act(http, base_url(server), keypair("bystander"), {"_": "ListAgents"})
    return status == 200 and value["_"] == "ListAgentsResponse"


async def test_wrong_content_type_is_415_and_the_connection_goes_on(server):
    base = base_url(server)
    body = sign_envelope(keypair("A"), {"_": "ListAgents"})
    async with httpx.AsyncClient() as http:
        for ctype in ("application/json", "text/plain", "application/octet-stream"):
            status, value = await post(http, base, body, headers={"Content-Type": ctype})
            assert status == 415 and value["_"] == "Error" and value["status"] == 415
        r = await http.post(base + "/api/message", content=body)   # no content type at all
        assert r.status_code == 415
        # Parameters on the media type are fine.
        status, value = await post(http, base, body, headers={"Content-Type": "application/cbor; charset=binary"})
        assert status == 200 and value["_"] == "ListAgentsResponse"


async def test_oversized_body_is_413_before_it_is_read(server):
    limit = server.app.config.limits.max_frame
    raw = await RawHttp.open(server)
    # A declared 1 GiB body, of which a few bytes are sent: the answer comes at once.
    t = time.monotonic()
    await raw.send(b"POST /api/message HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
                   b"Content-Length: %d\r\n\r\n\xa5" % (1 << 30))
    status, headers, body = await raw.response(timeout=5)
    assert status == 413 and time.monotonic() - t < 2
    assert dagcbor.decode(body)["status"] == 413 and headers["connection"] == "close"
    assert headers["access-control-allow-origin"] == "*"
    assert await raw.closed(timeout=5)
    raw.close()
    # A chunked body is cut where it crosses the limit.
    raw = await RawHttp.open(server)
    await raw.send(b"POST /agents/api/message HTTP/1.1\r\nHost: x\r\nContent-Type: application/cbor\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    sent = 0
    status = None
    while sent <= limit + len(chunk):
        try:
            await raw.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        except (ConnectionError, OSError):
            break
        sent += len(chunk)
    status, _headers, body = await raw.response(timeout=5)
    assert status == 413 and dagcbor.decode(body)["status"] == 413
    raw.close()
    assert await served(server)


async def test_slowloris_is_dropped_and_others_are_served_meanwhile(quick_server):
    raw = await RawHttp.open(quick_server)
    head = request("POST", "/api/message", headers={"Content-Type": "application/cbor"})
    started = time.monotonic()
    # Headers trickled a byte at a time, far slower than the 1 s bound allows.
    dropped = False
    for i in range(len(head)):
        try:
            await raw.send(head[i:i + 1])
        except (ConnectionError, OSError):
            dropped = True
            break
        assert await served(quick_server)       # the others are served meanwhile
        if await raw.closed(timeout=0.2):
            dropped = True
            break
        if time.monotonic() - started > 10:
            break
    assert dropped, "a trickled request head was not dropped"
    assert time.monotonic() - started < 5
    raw.close()
    # A body that stops is dropped too.
    raw = await RawHttp.open(quick_server)
    await raw.send(request("POST", "/api/message", headers={"Content-Type": "application/cbor"},
                           body=b"\x00" * 100)[:-60])
    assert await raw.closed(timeout=5)
    raw.close()
    assert await served(quick_server)


async def test_garbage_is_400(server):
    base = base_url(server)
    async with httpx.AsyncClient() as http:
        for body in (b"", b"\xff\xff", b"not cbor at all", dagcbor.encode([1, 2, 3]),
                     dagcbor.encode({"type": "AgentsAction"})):
            status, value = await post(http, base, body)
            assert status == 400 and value["_"] == "Error" and value["status"] == 400, (body, value)
    raw = await RawHttp.open(server)
    await raw.send(b"BREW /coffee HTCPCP/1.0\r\n\r\n")   # not HTTP at all
    status, headers, _body = await raw.response()
    assert status == 400 and headers["access-control-allow-origin"] == "*"
    raw.close()
    assert await served(server)


async def test_a_replayed_envelope_is_409_across_http_and_websocket(server):
    base = base_url(server)
    a = keypair("A")
    write = sign_envelope(a, {"_": "CreateAgent", "definition": {
        "name": "x", "systemPrompt": "", "modelProvider": "echo", "model": "m"}})
    read = sign_envelope(a, {"_": "ListAgents"})
    read2 = sign_envelope(a, {"_": "ListAgents", "n": 5})
    async with httpx.AsyncClient() as http:
        status, value = await post(http, base, write)
        assert status == 200 and value["_"] == "CreateAgentResponse"
        # HTTP first, then the same bytes on a socket.
        ws = await V2Client.open(server.url)
        assert (await ws.request(dagcbor.decode(write)))["status"] == 409
        # A read may repeat on its own keep-alive connection, not from a socket.
        assert (await post(http, base, read))[0] == 200
        assert (await post(http, base, read))[0] == 200
        assert (await ws.request(dagcbor.decode(read)))["status"] == 409
        # Socket first, then HTTP.
        assert (await ws.request(dagcbor.decode(read2)))["_"] == "ListAgentsResponse"
        status, value = await post(http, base, read2)
        assert status == 409 and value["status"] == 409
        await ws.close()
    async with httpx.AsyncClient() as other:   # another HTTP connection: a captured envelope
        assert (await post(other, base, read))[0] == 409


async def test_a_thousand_requests_on_one_keep_alive_connection(quick_server):
    base = base_url(quick_server)
    a = keypair("A")
    bodies = [sign_envelope(a, {"_": "ListAgents", "n": 1 + i}) for i in range(1000)]
    raw = await RawHttp.open(quick_server)
    statuses = []
    for i in range(0, 1000, 50):   # pipelined in groups of 50, all on one connection
        await raw.send(b"".join(request("POST", "/api/message", body,
                                        {"Content-Type": "application/cbor"}) for body in bodies[i:i + 50]))
        for _ in range(50):
            status, headers, body = await raw.response()
            statuses.append((status, dagcbor.decode(body)["_"], headers["connection"]))
    assert statuses == [(200, "ListAgentsResponse", "keep-alive")] * 1000
    raw.close()
    async with httpx.AsyncClient() as http:   # and through a client library's keep-alive pool
        for i in range(20):
            assert (await act(http, base, a, {"_": "ListAgents", "n": 2000 + i}))[0] == 200


async def test_a_client_that_disconnects_mid_body_loses_nothing(server):
    base = base_url(server)
    a = keypair("A")
    body = sign_envelope(a, {"_": "CreateAgent", "definition": {
        "name": "half", "systemPrompt": "", "modelProvider": "echo", "model": "m"}})
    raw = await RawHttp.open(server)
    await raw.send(request("POST", "/api/message", body, {"Content-Type": "application/cbor"})[:-20])
    raw.close()
    await raw.writer.wait_closed()
    async with httpx.AsyncClient() as http:
        status, value = await act(http, base, a, {"_": "ListAgents"})
        assert (status, value["agents"]) == (200, [])      # the half-sent CreateAgent never ran
        # The same envelope sent whole afterwards is executed once (it was never claimed).
        status, value = await post(http, base, body)
        assert status == 200 and value["_"] == "CreateAgentResponse"
        status, value = await act(http, base, a, {"_": "ListAgents", "n": 10})
        assert [x["definition"]["name"] for x in value["agents"]] == ["half"]
    # A client that sends a whole write and leaves before the answer: the write still commits,
    # once, and the server goes on serving.
    whole = sign_envelope(a, {"_": "CreateAgent", "definition": {
        "name": "left", "systemPrompt": "", "modelProvider": "echo", "model": "m"}})
    raw = await RawHttp.open(server)
    await raw.send(request("POST", "/api/message", whole, {"Content-Type": "application/cbor"}))
    raw.close()
    async with httpx.AsyncClient() as http:
        n = iter(range(20, 1020))

        async def listed() -> list | None:
            status, value = await act(http, base, a, {"_": "ListAgents", "n": next(n)})
            names = sorted(x["definition"]["name"] for x in value["agents"])
            return names if "left" in names else None

        names = await until(listed, 10, what="the agent 'left' listed")
        assert names == ["half", "left"]


async def test_options_is_204_and_every_answer_carries_cors(server):
    base = base_url(server)
    async with httpx.AsyncClient() as http:
        for path in ("/api/message", "/agents/api/message"):
            r = await http.options(base + path, headers={"Origin": "http://localhost:5173",
                                                         "Access-Control-Request-Method": "POST"})
            assert r.status_code == 204 and r.content == b""
            # A page's preflight is answered with its own origin (the desktop's, allowed by
            # default on loopback: server/transport/origins.py); the rest, asked by no page, `*`.
            assert_cors({**r.headers, "access-control-allow-origin": "*"})
            assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
        answers = [await http.get(base + p) for p in ("/api/health", "/agents/api/health", "/api/version",
                                                      "/agents/api/version", "/metrics", "/nope", "/agents/ws")]
        answers.append(await http.post(base + "/api/message", content=b"\xff", headers=CBOR_HEADERS))
        answers.append(await http.post(base + "/api/message", content=b"x", headers={"Content-Type": "text/plain"}))
        answers.append(await http.get(base + "/api/message"))
        for r in answers:
            assert_cors(r.headers)
        statuses = [r.status_code for r in answers]
        assert statuses == [200, 200, 200, 200, 200, 404, 426, 400, 415, 405]
        version = answers[2].json()
        assert version["schemaVersion"] == answers[0].json()["schemaVersion"] and version["version"]
    assert set(CORS) <= {k.lower() for k in answers[0].headers}


async def test_subscribe_over_http_is_400(server):
    a = keypair("A")
    async with httpx.AsyncClient() as http:
        status, value = await act(http, base_url(server), a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    assert status == 400 and "WebSocket" in value["message"]


async def test_unknown_paths_are_404(server):
    async with httpx.AsyncClient() as http:
        for path in ("/api", "/api/messages", "/agents/api/nope", "/agents/ws/x"):   # "/": the front page
            r = await http.get(base_url(server) + path)
            assert r.status_code == 404 and r.json()["status"] == "error"
            assert_cors(r.headers)
            r = await http.post(base_url(server) + path, content=b"\xa0", headers=CBOR_HEADERS)
            assert r.status_code == 404


async def test_v1_text_frame_of_byte_values_is_an_envelope(server):
    a = keypair("A")
    v1 = await V1.open(server.url)
    frame = sign_envelope(a, {"_": "ListAgents"})
    await v1.ws.send(json.dumps(list(frame)))
    assert await v1.recv() == {"_": "ListAgentsResponse", "agents": []}
    for text in ("[1, 2, 300]", "[\"a\"]", "{}", "hello", "[1.5]"):
        await v1.ws.send(text)
        r = await v1.recv()
        assert r["_"] == "Error" and r["status"] == 400, text
    await v1.close()


async def test_account_switch_is_refused_by_name_and_the_socket_keeps_its_account(server):
    a, b = keypair("A"), keypair("B")
    v1 = await V1.open(server.url)
    assert (await v1.send(a, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    r = await v1.send(b, {"_": "ListAgents"})
    assert r["status"] == 403 and "WebSocket account switch is not allowed" in r["message"]
    assert a.account_id in r["message"] and "Signer is not authorized" not in r["message"]
    assert (await v1.send(a, {"_": "ListAgents", "n": 3}))["_"] == "ListAgentsResponse"
    await v1.close()
    v2 = await V2Client.open(server.url)
    assert (await v2.call(b, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    r = await v2.call(a, {"_": "ListAgents"})
    assert r["status"] == 403 and "WebSocket account switch is not allowed" in r["message"]
    assert "Signer is not authorized" not in r["message"]
    assert (await v2.call(b, {"_": "ListAgents", "n": 3}))["_"] == "ListAgentsResponse"
    await v2.close()


async def test_an_upgrade_header_elsewhere_is_plain_http_and_a_socket_may_follow_keep_alive(server):
    raw = await RawHttp.open(server)
    # Another path with an Upgrade header, pipelined with a second request: both answered.
    await raw.send(request("GET", "/api/health", headers={"Connection": "Upgrade", "Upgrade": "h2c"})
                   + request("GET", "/api/version"))
    assert (await raw.response())[0] == 200
    assert (await raw.response())[0] == 200
    # The same keep-alive connection then asks for the WebSocket: it becomes a v1 socket.
    await raw.send(request("GET", "/agents/ws", headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}))
    head = await asyncio.wait_for(raw.reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101 ") and b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
    frame = await asyncio.wait_for(raw.reader.readexactly(2), 5)
    assert frame[0] == 0x81   # a text frame: {"_":"connected",...}
    text = await raw.reader.readexactly(frame[1] & 0x7F)
    assert json.loads(text)["_"] == "connected"
    raw.close()

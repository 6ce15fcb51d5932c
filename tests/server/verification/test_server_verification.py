"""Every step of the verification pipeline (CONTRACT section 2), over real sockets."""
from __future__ import annotations

import asyncio
import time

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.capability import make_capability
from seed_agents.protocol.wire.envelope import build_envelope, sign_envelope

from tests.waiting import until
from tests.wsraw import V1, V2Client, flatten, keypair, setup_session

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")


def now_ms():
    return int(time.time() * 1000)


async def test_health_and_metrics(server, storage):
    import httpx

    base = f"http://{server.host}:{server.port}"
    async with httpx.AsyncClient() as http:
        for path in ("/api/health", "/agents/api/health"):
            r = await http.get(base + path)
            body = r.json()
            assert r.status_code == 200 and body["ok"] is True and body["status"] == "ok"
            assert body["schemaVersion"] >= 1 and "version" in body and body["uptime"] >= 0
            assert body["storage"] == storage   # which backend; schemaVersion stays a number
        r = await http.get(base + "/metrics")
        assert r.status_code == 200 and "seed_agents_connections" in r.text
        assert (await http.get(base + "/nope")).status_code == 404


async def test_v1_connected_and_bad_frames_keep_socket_open(server):
    a = keypair("A")
    c = await V1.open(server.url)
    await c.ws.send("hello")
    r = await c.recv()
    assert r["_"] == "Error" and r["status"] == 400
    await c.ws.send(b"\xff\x00garbage")
    r = await c.recv()
    assert r["_"] == "Error" and r["status"] == 400
    r = await c.send(a, {"_": "ListAgents"})
    assert r == {"_": "ListAgentsResponse", "agents": []}
    await c.close()


async def test_signature_clock_and_shape_failures(server):
    a = keypair("A")
    c = await V1.open(server.url)
    # 401: flipped signature bit
    frame = bytearray(sign_envelope(a, {"_": "ListAgents"}))
    frame[10] ^= 1
    await c.ws.send(bytes(frame))
    r = await c.recv()
    assert r["_"] == "Error" and r["status"] == 401
    # 401: clock 31 s off either way
    for skew in (-31_000, 31_000):
        r = await c.send(a, {"_": "ListAgents"}, ts=now_ms() + skew)
        assert r["status"] == 401 and "clock" in r["message"]
    # 400: 63-byte signature
    env = build_envelope(a, {"_": "ListAgents"})
    env["sig"] = env["sig"][:63]
    await c.ws.send(dagcbor.encode(env))
    assert (await c.recv())["status"] == 400
    # 400: wrong type, missing account
    env = build_envelope(a, {"_": "ListAgents"})
    env["type"] = "AgentsActionX"
    await c.ws.send(dagcbor.encode(env))
    assert (await c.recv())["status"] == 400
    env = build_envelope(a, {"_": "ListAgents"})
    del env["account"]
    await c.ws.send(dagcbor.encode(env))
    assert (await c.recv())["status"] == 400
    # 413: over the frame limit
    await c.ws.send(sign_envelope(a, {"_": "SetSecret", "name": "x", "value": b"x" * (1 << 20)}))
    assert (await c.recv())["status"] == 413
    # 400: unknown action, bad field (naming it)
    r = await c.send(a, {"_": "FlyToTheMoon"})
    assert r["status"] == 400
    r = await c.send(a, {"_": "GetSession", "sessionId": 12})
    assert r["status"] == 400 and "sessionId" in r["message"]
    await c.close()


async def test_unauthorized_signer_then_register_signer(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    r = await c.call(b, {"_": "ListAgents"}, account=a.principal)
    assert r["status"] == 403 and "Signer is not authorized" in r["message"]
    cap = make_capability(a, b.principal, "AGENT", now_ms(), label="laptop")
    r = await c.call(b, {"_": "RegisterSigner", "capability": cap})
    assert r == {"_": "RegisterSignerResponse", "accountId": a.account_id, "signerId": b.account_id}
    # The retry on the same socket now passes step 5 (RegisterSigner did not bind the socket to B).
    r = await c.call(b, {"_": "ListAgents"}, account=a.principal)
    assert r == {"_": "ListAgentsResponse", "agents": []}
    # A capability whose delegate is not the signer is refused, and so is a corrupted blob.
    c2 = await V2Client.open(server.url)
    stranger = keypair("C")
    r = await c2.call(stranger, {"_": "RegisterSigner", "capability": cap})
    assert r["status"] == 400
    bad = bytearray(cap)
    bad[-1] ^= 0x80
    r = await c2.call(stranger, {"_": "RegisterSigner", "capability": bytes(bad)})
    assert r["status"] == 400
    await c.close()
    await c2.close()


async def test_replay_rules(server):
    a = keypair("A")
    c1 = await V1.open(server.url)
    c2 = await V1.open(server.url)
    write = sign_envelope(a, {"_": "CreateAgent", "definition": {
        "name": "x", "systemPrompt": "", "modelProvider": "echo", "model": "m"}})
    await c1.ws.send(write)
    assert (await c1.recv())["_"] == "CreateAgentResponse"
    await c1.ws.send(write)          # a write never repeats, even on its own connection
    assert (await c1.recv())["status"] == 409
    read = sign_envelope(a, {"_": "ListAgents"})
    await c1.ws.send(read)
    assert (await c1.recv())["_"] == "ListAgentsResponse"
    await c1.ws.send(read)           # a read may repeat on the connection that sent it
    assert (await c1.recv())["_"] == "ListAgentsResponse"
    await c2.ws.send(read)           # ...but from another connection it is a captured envelope
    assert (await c2.recv())["status"] == 409
    # A re-encoded copy (unsorted keys) of an accepted envelope is still a replay.
    value = dagcbor.decode(write)
    import cbor2

    await c2.ws.send(cbor2.dumps(dict(reversed(list(value.items())))))
    assert (await c2.recv())["status"] == 409
    await c1.close()
    await c2.close()


async def test_socket_cannot_switch_accounts(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    assert (await c.call(a, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    r = await c.call(b, {"_": "ListAgents"})
    assert r["status"] == 403
    await c.close()


async def test_other_accounts_resources_are_404(server):
    a, b = keypair("A"), keypair("B")
    ca, cb = await V2Client.open(server.url), await V2Client.open(server.url)
    agent_id, session_id = await setup_session(ca, a)
    run = await ca.call(a, {"_": "MessageSession", "sessionId": session_id,
                            "content": [{"type": "text", "text": "hi"}]})
    for action in ({"_": "GetAgent", "agentId": agent_id},
                   {"_": "GetSession", "sessionId": session_id},
                   {"_": "CreateSession", "agentId": agent_id},
                   {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "x"}]},
                   {"_": "StopSession", "sessionId": session_id},
                   {"_": "ListSessions", "agentId": agent_id},
                   {"_": "Subscribe", "key": f"sessions/{session_id}"},
                   {"_": "Subscribe", "key": f"agents/{agent_id}"},
                   {"_": "Subscribe", "key": f"runs/{run['runId']}"},
                   {"_": "Subscribe", "key": f"account/{a.account_id}"}):
        r = await cb.call(b, action)
        assert r["_"] == "Error" and r["status"] == 404, (action, r)
    await ca.close()
    await cb.close()


async def test_v2_concurrent_requests_answered_once_with_their_ids(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    actions = []
    for i in range(40):
        if i % 2:
            actions.append({"_": "GetSession", "sessionId": session_id, "limit": i})
        else:
            actions.append({"_": "CreateSession", "agentId": agent_id, "title": f"s{i}"})
    results = await asyncio.gather(*(c.call(a, x) for x in actions))
    for action, r in zip(actions, results):
        assert r["_"] == action["_"] + "Response", r
    # Nothing extra arrived: one answer per request, no event, and a later marker's answer is
    # the next frame (a duplicate or stray answer would come before it).
    assert not c.responses
    await c.answer_is_next_frame(a)
    assert len(c.frames) == 2 + len(actions) + 1   # setup_session's two calls, the 40, the marker
    await c.close()


async def test_idempotency_exactly_once_under_concurrency(server):
    a = keypair("A")
    conns = [await V2Client.open(server.url) for _ in range(10)]
    agent_id, _ = await setup_session(conns[0], a)
    action = {"_": "CreateSession", "agentId": agent_id, "title": "once", "clientRequestId": "req-1"}
    # Distinct ts per copy: byte-identical envelopes would be refused as replays (409) instead.
    t0 = now_ms()
    results = await asyncio.gather(*(c.call(a, dict(action), ts=t0 + i) for i, c in enumerate(conns)))
    ids = {r["sessionId"] for r in results}
    assert len(ids) == 1, results
    listed = await conns[0].call(a, {"_": "ListSessions", "agentId": agent_id})
    assert [s.get("title") for s in listed["sessions"]].count("once") == 1
    r = await conns[1].call(a, dict(action, title="different"))
    assert r["status"] == 409
    # MessageSession's clientMessageId: one user event, one run.
    sid = ids.pop()
    msg = {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "hello"}],
           "clientMessageId": "m-1"}
    results = await asyncio.gather(*(c.call(a, dict(msg), ts=t0 + i) for i, c in enumerate(conns)))
    assert len({r["userEventId"] for r in results}) == 1 and len({r["runId"] for r in results}) == 1
    for c in conns:
        await c.close()


async def test_unsubscribe(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    _, session_id = await setup_session(c, a)
    key = f"sessions/{session_id}"
    r = await c.call(a, {"_": "Subscribe", "key": key})
    assert r == {"_": "SubscribeResponse", "key": key, "accountId": a.account_id}
    assert (await c.event())["_"] == "change"
    assert (await c.event()) == {"_": "replayed", "key": key, "seq": 0}
    r = await c.raw(dagcbor.encode({"id": 999, "_": "Unsubscribe", "key": key}), req_id=999)
    assert r == {"_": "UnsubscribeResponse", "key": key}
    r = await c.raw(dagcbor.encode({"id": 1000, "_": "Unsubscribe", "key": "sessions/none"}), req_id=1000)
    assert r == {"_": "UnsubscribeResponse", "key": "sessions/none"}
    # A second socket still subscribed sees the whole turn; once it has the reply, the first
    # socket has been sent whatever it was going to get, and a marker's answer is its next frame.
    watcher = await V2Client.open(server.url)
    await watcher.call(a, {"_": "Subscribe", "key": key})
    await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "x"}]})
    async with asyncio.timeout(20):
        while not any(x["event"]["role"] == "assistant" for x in flatten(await watcher.event())):
            pass
    await c.answer_is_next_frame(a)
    await watcher.close()
    await c.close()


async def test_metrics_count_actions_and_verify_failures(server):
    import httpx

    a = keypair("A")
    c = await V2Client.open(server.url)
    await c.call(a, {"_": "ListAgents"})
    await c.call(a, {"_": "ListAgents"}, ts=now_ms() - 60_000)
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://{server.host}:{server.port}/metrics")).text
    assert 'seed_agents_actions_total{action="ListAgents",status="200"} 1.0' in text
    assert 'seed_agents_verify_failures_total{reason="signature_or_clock"} 1.0' in text
    assert 'seed_agents_connections{framing="v2"} 1.0' in text
    assert "seed_agents_action_seconds_bucket" in text
    await c.close()


async def test_metrics_count_the_databases_commits_and_their_jobs(server):
    """The group commit's counters on /metrics: each write an action makes is a job, and a
    commit carries one job or more (docs/operations.md, "Metrics")."""
    import httpx

    def counters(text: str) -> tuple[float, float]:
        values = dict(line.split(" ", 1) for line in text.splitlines()
                      if line.startswith(("seed_agents_db_commits ", "seed_agents_db_write_jobs ")))
        return float(values["seed_agents_db_commits"]), float(values["seed_agents_db_write_jobs"])

    a = keypair("A")
    c = await V2Client.open(server.url)
    url = f"http://{server.host}:{server.port}/metrics"
    async with httpx.AsyncClient() as http:
        commits0, jobs0 = counters((await http.get(url)).text)
        await setup_session(c, a)   # CreateAgent and CreateSession: writes, each answered once committed
        commits1, jobs1 = counters((await http.get(url)).text)
    assert commits1 >= commits0 + 1 and jobs1 >= jobs0 + 2, (commits0, jobs0, commits1, jobs1)
    assert jobs1 - jobs0 >= commits1 - commits0   # a commit carries at least one job
    await c.close()


async def test_v2_oversized_frames_are_413_without_being_decoded(server):
    import cbor2

    a = keypair("A")
    c = await V2Client.open(server.url)
    env = build_envelope(a, {"_": "SetSecret", "name": "big", "value": b"x" * (1 << 20)})
    r = await c.request(env, req_id=7)
    assert r["status"] == 413
    # Non-canonical (keys reversed), so the id cannot be sliced from the head: an error event.
    await c.ws.send(cbor2.dumps({"envelope": env, "id": 8}))
    e = await c.event()
    assert e["_"] == "error" and e["status"] == 413
    assert (await c.call(a, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"   # still open
    await c.close()


async def test_a_socket_without_an_account_is_rate_limited_before_verification(tmp_path):
    from seed_agents.server.main import start_server

    from tests.conftest import make_config

    running = await start_server(make_config(tmp_path, rate_per_second=1.0, rate_burst=5))
    try:
        a = keypair("A")
        c = await V2Client.open(running.url)
        bad = build_envelope(a, {"_": "ListAgents"})
        statuses = []
        for i in range(8):
            env = dict(bad, sig=bytes(64))   # never verifies, so the socket never binds
            env["action"] = dict(bad["action"], ts=now_ms() + i)
            statuses.append((await c.request(env))["status"])
        assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
        await c.close()
    finally:
        await running.stop()


async def test_connections_past_the_server_limit_are_refused_with_503(tmp_path):
    from websockets.exceptions import InvalidStatus

    from seed_agents.server.main import start_server

    from tests.conftest import make_config

    running = await start_server(make_config(tmp_path, max_connections=2))
    try:
        a = keypair("A")
        c1, c2 = await V2Client.open(running.url), await V2Client.open(running.url)
        # a connection counts once its handshake is done
        await until(lambda: len(running.app.connections) == 2, 0.5, step=0.01, what="two connections counted")
        try:
            await V2Client.open(running.url)
        except InvalidStatus as exc:
            assert exc.response.status_code == 503
        else:
            raise AssertionError("a third connection was accepted")
        assert (await c1.call(a, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
        await c2.close()
        await until(lambda: len(running.app.connections) < 2, 0.5, step=0.01, what="the closed connection uncounted")
        c3 = await V2Client.open(running.url)   # room again
        assert (await c3.call(a, {"_": "ListAgents"}, ts=now_ms() + 1))["_"] == "ListAgentsResponse"
        await c1.close()
        await c3.close()
    finally:
        await running.stop()

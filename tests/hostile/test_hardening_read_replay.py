"""Issue 12, finding 8: a read answered right before a SIGKILL cannot be replayed after the
restart from another connection (docs/protocol.md, "Replay").

Reads' claims are persisted in batches, so the crash may lose them; the server refuses, after a
start, every read signed at or before that start that it has not seen itself, and makes the claim
of a read signed ahead of its clock durable before answering it. The server is a child process,
killed the moment the answer arrives.
"""
from __future__ import annotations

import time

from seed_agents.protocol.wire.envelope import build_envelope, sign_envelope

from tests.procs import ServerProcess
from tests.wsraw import V1, V2Client, keypair

A = keypair("read-replay-A")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def is_replay(r: dict) -> bool:
    return r["_"] in ("Error", "error") and r["status"] == 409


async def test_reads_answered_just_before_a_sigkill_are_refused_after_restart(tmp_path):
    srv = ServerProcess(tmp_path / "srv").start()
    try:
        # 1. a read signed 5 s ahead of the server clock (a client whose clock runs fast):
        #    answered on v2, then the server is killed at once
        v2 = await V2Client.open(srv.url)
        ahead = build_envelope(A, {"_": "ListAgents"}, ts=now_ms() + 5_000)
        assert (await v2.request(ahead))["_"] == "ListAgentsResponse"
        srv.kill()
        await v2.close()

        # 2. an ordinary read on v1, same again
        srv.start()
        v1 = await V1.open(srv.url)
        ordinary = sign_envelope(A, {"_": "ListModelProviders"})
        await v1.ws.send(ordinary)
        assert (await v1.recv())["_"] == "ListModelProvidersResponse"
        srv.kill()
        await v1.close()

        # 3. after the restart, both from new connections, in both framings: 409
        srv.start()
        v1 = await V1.open(srv.url)
        v2 = await V2Client.open(srv.url)
        await v1.ws.send(ordinary)
        r = await v1.recv()
        assert is_replay(r), r
        r = await v2.raw(b"\xa2\x62id\x01\x68envelope" + ordinary, req_id=1)
        assert is_replay(r), r
        r = await v2.request(ahead)
        assert is_replay(r), r
        await v1.ws.send(sign_envelope(A, {"_": "ListAgents"}, ts=ahead["action"]["ts"]))
        r = await v1.recv()   # the same action and ts from the same key: the same bytes
        assert is_replay(r), r

        # a read signed before this start but never sent is refused the same way (the cost of
        # the rule: a client re-signs); freshly signed reads and writes are served
        r = await v2.call(A, {"_": "ListAgents"}, ts=now_ms() - 10_000)
        assert is_replay(r) and "sign the action again" in r["message"], r
        assert (await v2.call(A, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
        assert (await v1.send(A, {"_": "ListModelProviders"}))["_"] == "ListModelProvidersResponse"
        r = await v2.call(A, {"_": "CreateAgent", "definition": {
            "name": "x", "systemPrompt": "", "modelProvider": "echo", "model": "m"}},
            ts=now_ms() - 10_000)
        assert r["_"] == "CreateAgentResponse", r   # writes are durable anyway: not refused
        await v1.close()
        await v2.close()
    finally:
        srv.kill()

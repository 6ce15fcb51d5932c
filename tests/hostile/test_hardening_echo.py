"""Issue 12, findings 6 and 7, over real sockets in both framings.

6. An error never echoes a client value at length: huge field values (escape-heavy text, bytes)
   in every position a frame can reach, signed or not, get an answer under 1 KB.
7. Every integer a client sends is range-checked at parse time (0..2^53 - 1, docs/protocol.md
   "Integers"): 2^53, 2^63, 2^64 - 1 and negatives in GetSession.afterSeq, Subscribe.afterSeq,
   limits and a crafted ListSessions cursor are a 400, never a 500; the largest safe value works.
"""
from __future__ import annotations

import json
import time

import pytest
from websockets.asyncio.client import connect

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.protocol.wire.keys import Keypair

from tests.wsraw import V1, V2, V2Client, keypair, setup_session

A = keypair("echo-A")
B = keypair("echo-B")
REPLY_BOUND = 1024
# Every character of this escapes to several (\x00, \", \\, \u2028...), so an echoed value grows
# about fourfold: the 900 KB frame of the review became a 4.5 MB reply.
NASTY = '\x00"\\\n\u2028é'
BIG = (NASTY * (150_000 // len(NASTY) + 1))[:150_000]      # ~300 KB encoded
HUGE = (NASTY * (450_000 // len(NASTY) + 1))[:450_000]     # ~900 KB encoded
CAP_BIG = "\x00" * 60_000                                  # fits a 64 KB capability blob


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def unsigned(action: dict, **fields) -> dict:
    env = {"type": "AgentsAction", "signer": A.principal, "sig": bytes(64),
           "account": A.principal, "action": action}
    env.update(fields)
    return env


def capability_blob(**fields) -> bytes:
    body = {"type": "Capability", "signer": A.principal, "delegate": keypair("echo-D").principal,
            "role": "AGENT", "ts": now_ms(), "sig": bytes(64)}
    body.update(fields)
    return dagcbor.encode(body)


def duplicate_key_envelope() -> bytes:
    """A non-canonical map (under the strict reader's 64 KB) with a 30 KB key twice."""
    key = dagcbor.encode("\x00" * 30_000)
    return b"\xa2" + key + b"\x01" + key + b"\x02"


def attack_frames(session_id: str) -> list[tuple[str, bytes]]:
    """(label, v1 frame): each carries a huge value where a message might quote it."""
    ts = now_ms()
    signed = [
        ("action name", {"_": HUGE}),
        ("provider type", {"_": "SetModelProvider", "name": "p", "provider": {"type": HUGE}}),
        ("provider baseUrl", {"_": "SetModelProvider", "name": "p",
                              "provider": {"type": "custom", "baseUrl": HUGE}}),
        ("content part type", {"_": "MessageSession", "sessionId": session_id,
                               "content": [{"type": HUGE}]}),
        ("subscribe key", {"_": "Subscribe", "key": HUGE}),
        ("session id", {"_": "GetSession", "sessionId": HUGE}),
        ("agent id", {"_": "CreateSession", "agentId": HUGE}),
        ("cursor", {"_": "ListSessions", "cursor": HUGE}),
        ("definition", {"_": "CreateAgent", "definition": {"name": HUGE}}),
        ("secret value", {"_": "SetSecret", "name": "s", "value": HUGE.encode()}),
        ("capability bytes", {"_": "RegisterSigner", "capability": HUGE.encode()}),
        ("capability role", {"_": "RegisterSigner", "capability": capability_blob(role=CAP_BIG)}),
        ("capability type", {"_": "RegisterSigner", "capability": capability_blob(type=CAP_BIG)}),
        ("capability ts", {"_": "RegisterSigner", "capability": capability_blob(ts=CAP_BIG)}),
        ("capability signer", {"_": "RegisterSigner",
                               "capability": capability_blob(signer=CAP_BIG.encode())}),
        ("afterSeq", {"_": "GetSession", "sessionId": session_id, "afterSeq": HUGE}),
    ]
    frames = [(label, sign_envelope(A, action)) for label, action in signed]
    frames += [
        ("envelope type", dagcbor.encode(unsigned({"_": "ListAgents", "ts": ts}, type=HUGE))),
        ("action ts", dagcbor.encode(unsigned({"_": "ListAgents", "ts": HUGE}))),
        ("action ts bytes", dagcbor.encode(unsigned({"_": "ListAgents", "ts": HUGE.encode()}))),
        ("signer", dagcbor.encode(unsigned({"_": "ListAgents", "ts": ts}, signer=HUGE.encode()))),
        ("sig", dagcbor.encode(unsigned({"_": "ListAgents", "ts": ts}, sig=HUGE.encode()))),
        ("action name unsigned", dagcbor.encode(unsigned({"_": HUGE, "ts": ts}))),
        ("unsigned, bad sig", dagcbor.encode(unsigned({"_": "GetSession", "ts": ts,
                                                       "sessionId": BIG}))),
        ("duplicate key", duplicate_key_envelope()),
    ]
    return frames


async def test_huge_values_anywhere_get_small_answers_v1(server):
    v2 = await V2Client.open(server.url)
    _agent, session_id = await setup_session(v2, A)
    v1 = await V1.open(server.url)
    try:
        for label, frame in attack_frames(session_id):
            assert len(frame) <= 1 << 20, label
            await v1.ws.send(frame)
            raw = await v1.ws.recv()
            answer = json.loads(raw)
            assert answer["_"] in ("Error", "error") and answer["status"] in (400, 401), (label, answer)
            assert len(raw.encode()) < REPLY_BOUND, (label, len(raw), raw[:300])
        # the socket and the server still serve
        assert (await v1.send(A, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    finally:
        await v1.close()
        await v2.close()


async def test_huge_values_anywhere_get_small_answers_v2(server):
    client = await V2Client.open(server.url)
    _agent, session_id = await setup_session(client, A)
    await client.close()
    async with connect(server.url, subprotocols=[V2], max_size=None) as ws:
        for i, (label, frame) in enumerate(attack_frames(session_id)):
            # the envelope bytes spliced into {id, envelope} as they are (the duplicate-key one is
            # not canonical, so the server reads that frame whole)
            await ws.send(b"\xa2\x62id" + dagcbor.encode(i) + b"\x68envelope" + frame)
            raw = await ws.recv()
            answer = dagcbor.decode(raw)
            response = answer.get("response", answer)
            assert response.get("status") in (400, 401), (label, response)
            assert len(raw) < REPLY_BOUND, (label, len(raw), raw[:300])


# -- finding 7: integer extremes -----------------------------------------------------------------

EXTREMES = [2**53, 2**63 - 1, 2**63, 2**64 - 1, -1, -(2**63), -(2**64)]


def crafted_cursor(updated_at: int | str) -> dict:
    return {"updatedBefore": updated_at, "idBefore": "x"}


async def test_integer_extremes_are_400_and_the_largest_safe_value_works(server):
    client = await V2Client.open(server.url)
    v1 = await V1.open(server.url)
    try:
        agent_id, session_id = await setup_session(client, A)
        for n in EXTREMES:
            cases = [
                {"_": "GetSession", "sessionId": session_id, "afterSeq": n},
                {"_": "GetSession", "sessionId": session_id, "limit": n},
                {"_": "ListSessions", "limit": n},
                {"_": "ListSessions", "cursor": crafted_cursor(n)},
                {"_": "ListSessions", "agentId": agent_id, "cursor": crafted_cursor(n)},
                {"_": "Subscribe", "key": "sessions/" + session_id, "afterSeq": n},
            ]
            for action in cases:
                r = await client.call(A, action)
                assert r["_"] == "Error" and r["status"] == 400, (action, r)
                assert "must be an integer between" in r["message"] or "cursor" in r["message"], r
            # v1 Subscribe answers in its own shape, with the same status (another account, so the
            # envelope is not the one just sent in the same millisecond: that would be a replay)
            r = await v1.send(B, {"_": "Subscribe", "key": "sessions/" + session_id, "afterSeq": n})
            assert r["_"] == "error" and r["status"] == 400, r
        r = await client.call(A, {"_": "ListSessions", "cursor": crafted_cursor("9" * 5000)})
        assert r["_"] == "Error" and r["status"] == 400, r
        # the top of the range is a valid (empty) answer, and a valid cursor still pages
        top = 2**53 - 1
        r = await client.call(A, {"_": "GetSession", "sessionId": session_id, "afterSeq": top})
        assert r["_"] == "GetSessionResponse" and r["events"] == [], r
        r = await client.call(A, {"_": "ListSessions", "cursor": crafted_cursor(top)})
        assert r["_"] == "ListSessionsResponse" and [s["id"] for s in r["sessions"]] == [session_id], r
        r = await client.call(A, {"_": "Subscribe", "key": "sessions/" + session_id, "afterSeq": top})
        assert r["_"] == "SubscribeResponse", r
        assert (await client.call(A, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    finally:
        await v1.close()
        await client.close()


@pytest.mark.parametrize("value", [2**53, 2**64 - 1, -1])
def test_capability_ts_out_of_range_is_400(value):
    from seed_agents.protocol.wire.capability import parse_capability
    from seed_agents.protocol.wire.errors import ProtocolError

    issuer = Keypair.from_seed(bytes(32))
    body = {"type": "Capability", "signer": issuer.principal,
            "delegate": keypair("d").principal, "role": "AGENT", "ts": value, "sig": bytes(64)}
    body["sig"] = issuer.sign(dagcbor.encode(body))
    with pytest.raises(ProtocolError) as e:
        parse_capability(dagcbor.encode(body))
    assert e.value.status == 400 and "capability ts" in e.value.message



def test_docs_state_these_bounds():
    """docs/operations.md (Limits, Security) and docs/protocol.md give the bounds the code uses."""
    from pathlib import Path

    from seed_agents.protocol.api.actions import MAX_SAFE_INTEGER
    from seed_agents.protocol.wire.errors import QUOTE_LIMIT

    docs = Path(__file__).resolve().parents[2] / "docs"
    operations = (docs / "operations.md").read_text()
    limits = operations.split("## Limits", 1)[1].split("\n## ", 1)[0]
    assert str(MAX_SAFE_INTEGER) in limits
    assert f"at most {QUOTE_LIMIT} characters" in limits
    security = operations.split("## Security", 1)[1].split("\n## ", 1)[0]
    for name in ("echo", "fuzz", "read_replay", "files", "ownership", "capability"):
        test_file = f"test_hardening_{name}.py"
        assert f"`{test_file}`" in security and (Path(__file__).parent / test_file).exists(), name
    protocol = (docs / "protocol.md").read_text()
    assert "## Capabilities" in protocol and "**Integers.**" in protocol
    assert "9 007 199 254 740 991" in protocol and MAX_SAFE_INTEGER == 9_007_199_254_740_991

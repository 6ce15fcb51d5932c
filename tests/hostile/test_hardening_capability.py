"""Issue 12, finding 12: what a capability's `ts` and `role` mean (docs/protocol.md,
"Capabilities"), over a real socket.

- `role` AGENT (what the Seed desktop delegates with) or WRITER lets the delegate act for the
  account; any other role is a 400 and the delegate stays unauthorized (403).
- `ts` is when the issuer signed it: dated later than server time plus the clock window is a 400
  (a capability from the future); inside the window or in the past (any age) it is accepted.
"""
from __future__ import annotations

import time

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.capability import make_capability
from seed_agents.protocol.wire.keys import Keypair

from tests.wsraw import V1, V2Client, keypair

WINDOW = 30_000   # the server's default clock window


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def raw_capability(issuer: Keypair, delegate: Keypair, role: object, ts: object) -> bytes:
    """A correctly signed blob with any role/ts (make_capability refuses bad roles)."""
    body = {"type": "Capability", "signer": issuer.principal, "delegate": delegate.principal,
            "role": role, "ts": ts, "sig": bytes(64)}
    body["sig"] = issuer.sign(dagcbor.encode(body))
    return dagcbor.encode(body)


async def register_then_act(url: str, issuer: Keypair, delegate: Keypair, blob: bytes) -> tuple[dict, dict]:
    """(RegisterSigner answer, the delegate's ListAgents for the issuer's account), on one socket
    as the Seed desktop does it."""
    c = await V2Client.open(url)
    try:
        registered = await c.call(delegate, {"_": "RegisterSigner", "capability": blob})
        acted = await c.call(delegate, {"_": "ListAgents"}, account=issuer.principal)
        return registered, acted
    finally:
        await c.close()


@pytest.mark.parametrize("role", ["AGENT", "WRITER"])
@pytest.mark.parametrize("age_ms", [0, 365 * 24 * 3600 * 1000, -(WINDOW - 5_000)])
async def test_agent_and_writer_capabilities_delegate(server, role, age_ms):
    issuer, delegate = keypair(f"cap-issuer-{role}-{age_ms}"), keypair(f"cap-delegate-{role}-{age_ms}")
    blob = make_capability(issuer, delegate.principal, role, now_ms() - age_ms)
    registered, acted = await register_then_act(server.url, issuer, delegate, blob)
    assert registered == {"_": "RegisterSignerResponse", "accountId": issuer.account_id,
                          "signerId": delegate.account_id}, registered
    assert acted == {"_": "ListAgentsResponse", "agents": []}, acted


@pytest.mark.parametrize("ahead_ms", [WINDOW + 5_000, 24 * 3600 * 1000])
async def test_capability_from_the_future_is_400(server, ahead_ms):
    issuer, delegate = keypair(f"cap-future-{ahead_ms}"), keypair(f"cap-future-d-{ahead_ms}")
    blob = make_capability(issuer, delegate.principal, "AGENT", now_ms() + ahead_ms)
    registered, acted = await register_then_act(server.url, issuer, delegate, blob)
    assert registered["_"] == "Error" and registered["status"] == 400, registered
    assert "ahead of server time" in registered["message"], registered
    assert acted["status"] == 403 and "Signer is not authorized" in acted["message"], acted


@pytest.mark.parametrize("role, ts", [
    ("OWNER", None), ("agent", None), ("", None), (7, None), (None, None),
    ("AGENT", -1), ("AGENT", 2**53), ("AGENT", 2**64 - 1), ("AGENT", 1.5e12), ("AGENT", "now"),
])
async def test_other_roles_and_bad_ts_are_400(server, role, ts):
    issuer, delegate = keypair(f"cap-bad-{role}-{ts}"), keypair(f"cap-bad-d-{role}-{ts}")
    blob = raw_capability(issuer, delegate, role, now_ms() if ts is None else ts)
    registered, acted = await register_then_act(server.url, issuer, delegate, blob)
    assert registered["_"] == "Error" and registered["status"] == 400, registered
    assert acted["status"] == 403, acted


async def test_v1_delegation_as_the_desktop_does_it(server):
    # The desktop sends RegisterSigner and retries over one HTTP/v1 connection.
    issuer, delegate = keypair("cap-v1-issuer"), keypair("cap-v1-delegate")
    v1 = await V1.open(server.url)
    try:
        blob = make_capability(issuer, delegate.principal, "AGENT", now_ms(), label="Seed desktop")
        r = await v1.send(delegate, {"_": "RegisterSigner", "capability": blob})
        assert r["_"] == "RegisterSignerResponse", r
        r = await v1.send(delegate, {"_": "ListAgents"}, account=issuer.principal)
        assert r["_"] == "ListAgentsResponse", r
    finally:
        await v1.close()

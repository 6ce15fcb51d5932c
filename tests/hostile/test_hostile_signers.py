"""A leaked device key (docs/protocol.md "Capabilities"): a capability may carry `expiresAt`,
after which its delegate no longer acts for the account; and the account can take a delegate's
key back with UnregisterSigner, signed by its own key only, which also closes at once every
socket that acted through that key, on every server of a shared store. Over real sockets."""
from __future__ import annotations

import asyncio
import time

from seed_agents.protocol.wire.capability import make_capability

from tests.pg import postgres_url  # noqa: F401  (fixture)
from tests.waiting import until
from tests.wsraw import V2Client, keypair


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_an_expired_capability_no_longer_delegates(server):
    issuer, delegate = keypair("expiring issuer"), keypair("expiring delegate")
    c = await V2Client.open(server.url)
    try:
        old = make_capability(issuer, delegate.principal, "AGENT", now_ms() - 10_000, expires_at=now_ms() - 1)
        r = await c.call(delegate, {"_": "RegisterSigner", "capability": old})
        assert r["status"] == 400 and "expired" in r["message"]
        soon = now_ms() + 1500
        blob = make_capability(issuer, delegate.principal, "AGENT", now_ms(), expires_at=soon)
        assert (await c.call(delegate, {"_": "RegisterSigner", "capability": blob}))["_"] == "RegisterSignerResponse"
        assert (await c.call(delegate, {"_": "ListAgents"}, account=issuer.principal))["_"] == "ListAgentsResponse"
        await until(lambda: now_ms() > soon, 10, step=0.05, what="the capability's expiry")
        r = await c.call(delegate, {"_": "ListAgents", "n": 2}, account=issuer.principal)
        assert r["status"] == 403 and "RegisterSigner" in r["message"]
    finally:
        await c.close()


async def test_unregister_signer_refuses_the_key_and_closes_its_sockets(server):
    issuer, delegate, stranger = keypair("unreg issuer"), keypair("unreg delegate"), keypair("unreg other")
    blob = make_capability(issuer, delegate.principal, "AGENT", now_ms())
    reg = await V2Client.open(server.url)
    device = await V2Client.open(server.url)
    owner = await V2Client.open(server.url)
    try:
        assert (await reg.call(delegate, {"_": "RegisterSigner", "capability": blob}))["_"] == "RegisterSignerResponse"
        r = await device.call(delegate, {"_": "CreateAgent", "definition": {
            "name": "d", "systemPrompt": "", "modelProvider": "echo", "model": "m"}}, account=issuer.principal)
        assert r["_"] == "CreateAgentResponse", r
        # Only the account's own key may do it: not the delegate, not another account.
        r = await device.call(delegate, {"_": "UnregisterSigner", "signerId": delegate.account_id},
                              account=issuer.principal)
        assert r["status"] == 403
        r = await owner.call(issuer, {"_": "UnregisterSigner", "signerId": stranger.account_id})
        assert r["status"] == 404
        r = await owner.call(issuer, {"_": "UnregisterSigner", "signerId": delegate.account_id})
        assert r == {"_": "UnregisterSignerResponse", "accountId": issuer.account_id,
                     "signerId": delegate.account_id}
        # The device's socket, which acted through the key, is closed at once.
        await asyncio.wait_for(device.ws.wait_closed(), 5)
        assert device.ws.close_code == 1008 and "unregistered" in device.ws.close_reason
        # And the key is refused from now on, on any socket.
        again = await V2Client.open(server.url)
        r = await again.call(delegate, {"_": "ListAgents"}, account=issuer.principal)
        assert r["status"] == 403
        await again.close()
        # The owner's own socket is untouched.
        assert (await owner.call(issuer, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    finally:
        for c in (reg, device, owner):
            await c.close()


async def test_unregister_signer_closes_the_keys_sockets_on_every_server_of_a_shared_store(tmp_path, postgres_url):  # noqa: F811
    from seed_agents.server.main import start_server
    from seed_agents.server.database.url import parse_storage_url

    from tests.conftest import make_config

    servers = []
    issuer, delegate = keypair("cluster unreg issuer"), keypair("cluster unreg delegate")
    try:
        for name in ("a", "b"):
            cfg = make_config(tmp_path / name)
            cfg.storage_url = parse_storage_url(postgres_url)
            servers.append(await start_server(cfg))
        a, b = servers
        device = await V2Client.open(b.url)   # the delegate works through server b
        owner = await V2Client.open(a.url)    # the account takes the key back through server a
        blob = make_capability(issuer, delegate.principal, "AGENT", now_ms())
        assert (await device.call(delegate, {"_": "RegisterSigner", "capability": blob}))["_"] == "RegisterSignerResponse"
        assert (await device.call(delegate, {"_": "ListAgents"}, account=issuer.principal))["_"] == "ListAgentsResponse"
        r = await owner.call(issuer, {"_": "UnregisterSigner", "signerId": delegate.account_id})
        assert r["_"] == "UnregisterSignerResponse", r
        await asyncio.wait_for(device.ws.wait_closed(), 10)
        assert device.ws.close_code == 1008
        again = await V2Client.open(b.url)   # b forgot the key too (its cache was told)
        assert (await again.call(delegate, {"_": "ListAgents", "n": 2}, account=issuer.principal))["status"] == 403
        await again.close()
        await owner.close()
    finally:
        for s in servers:
            await s.stop()

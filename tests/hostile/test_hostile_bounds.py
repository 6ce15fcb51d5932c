"""Issue 32, findings 14 and 15: what a client may not store, over real sockets against a server
child process on SQLite and PostgreSQL. A cron expression that never matches is a 400 at create
and update (it was a 500), and the all-zero seed is not a signing identity."""
from __future__ import annotations

import base64
import os

import pytest

from tests.procs import ServerProcess
from tests.server.handlers.test_lifecycle_sessions import call
from tests.triggers_helpers import create_trigger, make_agent
from tests.wsraw import V2Client, keypair

LIMITS = ["--rate-limit", "100000", "--rate-burst", "100000"]


@pytest.fixture(params=["sqlite", "postgresql"])
def child(request, tmp_path, monkeypatch):
    """A server child process on the storage named."""
    monkeypatch.setenv("SEED_AGENTS_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    flags = list(LIMITS)
    if request.param == "postgresql":
        flags += ["--storage-url", request.getfixturevalue("postgres_url")]
    srv = ServerProcess(tmp_path / "srv", extra=flags).start(timeout=60)
    try:
        yield srv
    finally:
        srv.kill()


async def test_a_cron_that_never_matches_is_400_at_create_and_update(child):
    a = keypair("A")
    c = await V2Client.open(child.url)
    try:
        agent_id = await make_agent(c, a)
        for expression in ("0 0 31 2 *", "0 0 31 4,6 *", "0 0 30 2 *"):
            never = {"type": "schedule", "schedule": {"kind": "cron", "expression": expression}}
            r = await call(c, a, {"_": "CreateAgentTrigger", "agentId": agent_id,
                                  "trigger": {"name": "never", "source": never, "prompt": "p"}})
            assert (r["_"], r["status"]) == ("Error", 400), r
            assert "never matches" in r["message"] and expression in r["message"], r
        assert (await call(c, a, {"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"] == []

        leap = {"type": "schedule", "schedule": {"kind": "cron", "expression": "0 9 29 2 *"}}
        trigger = await create_trigger(c, a, agent_id, leap, name="leap")   # rare, but it matches
        assert trigger["source"] == leap
        r = await call(c, a, {"_": "UpdateAgentTrigger", "triggerId": trigger["id"], "patch": {
            "source": {"type": "schedule", "schedule": {"kind": "cron", "expression": "0 0 31 2 *"}}}})
        assert (r["_"], r["status"]) == ("Error", 400) and "never matches" in r["message"], r
        got = await call(c, a, {"_": "GetAgentTrigger", "triggerId": trigger["id"]})
        assert got["trigger"]["source"] == leap   # unchanged
        # An off trigger turned on computes its first slot too: still fine for a real schedule.
        r = await call(c, a, {"_": "UpdateAgentTrigger", "triggerId": trigger["id"], "patch": {"enabled": False}})
        r = await call(c, a, {"_": "UpdateAgentTrigger", "triggerId": trigger["id"], "patch": {"enabled": True}})
        assert r["_"] == "UpdateAgentTriggerResponse", r
        assert "Traceback" not in child.log.read_text()
    finally:
        await c.close()


async def test_the_all_zero_seed_is_not_a_signing_identity(child):
    a = keypair("A")
    c = await V2Client.open(child.url)
    try:
        r = await call(c, a, {"_": "ImportSigningIdentity", "seed": bytes(32), "label": "Zero"})
        assert (r["_"], r["status"]) == ("Error", 400), r
        assert r["message"].startswith("ImportSigningIdentity.seed is all zeros, a key anyone can sign with"), r
        assert (await call(c, a, {"_": "ListSigningIdentities"}))["identities"] == []
        # A seed from a random source is still welcome.
        r = await call(c, a, {"_": "ImportSigningIdentity", "seed": os.urandom(32), "label": "Mine"})
        assert r["_"] == "ImportSigningIdentityResponse", r
    finally:
        await c.close()

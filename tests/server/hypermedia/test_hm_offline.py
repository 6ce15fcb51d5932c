"""Connected out of the box, and fine without a network: the public Seed gateway by default,
`--hm-server-url ''` offline; a server whose HM server does not answer starts and serves at once,
and says so in one log line and in health."""
from __future__ import annotations

import asyncio
import logging
import time

import httpx

from seed_agents.server.config import load_config
from seed_agents.server.main import start_server

from tests.conftest import make_config
from tests.fakes.hm_server import FakeHmServer
from tests.procs import free_port


def test_the_default_is_the_public_gateway_and_empty_is_offline():
    assert load_config(None, env={}).hm_server_url == "https://hyper.media"
    assert load_config(None, env={"SEED_AGENTS_HM_SERVER_URL": ""}).hm_server_url is None
    assert load_config(None, env={"SEED_AGENTS_HM_SERVER_URL": "http://127.0.0.1:9/"}).hm_server_url \
        == "http://127.0.0.1:9"


async def health(running) -> dict:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{running.http_url}/api/health", timeout=5)).json()


async def wait_health(running, check, timeout: float = 20) -> dict:
    async with asyncio.timeout(timeout):
        while True:
            body = await health(running)
            if check(body):
                return body
            await asyncio.sleep(0.05)


async def test_an_unreachable_hm_server_is_said_once_and_nothing_waits_for_it(tmp_path, caplog):
    dead = f"http://127.0.0.1:{free_port()}"   # nothing listens there
    caplog.set_level(logging.INFO, logger="seed_agents")
    started = time.monotonic()
    running = await start_server(make_config(tmp_path, hm_server_url=dead, hm_server_timeout=2.0))
    try:
        assert time.monotonic() - started < 10   # (it serves before the HM server is asked)
        body = await wait_health(running, lambda b: b["hmServer"]["reachable"] is not None)
        assert body["hmServer"] == {"reachable": False, "error": "could not be reached: it refused the connection",
                                    "publications": {"pending": 0, "failed": 0}}
        assert body["searches"]["seed"] is True and body["hmServerUrl"] == dead
        lines = [r.getMessage() for r in caplog.records if "Seed hypermedia server" in r.getMessage()]
        assert lines == [f"the Seed hypermedia server at {dead} could not be reached: it refused the connection: "
                         "working offline until it answers (identities and documents are kept here and their "
                         "publication queued; hm:// and ipfs:// reads, other writes and Seed search fail meanwhile)"]
    finally:
        await running.stop()


async def test_a_reachable_hm_server_is_said_once_too(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="seed_agents")
    async with FakeHmServer() as hm:
        running = await start_server(make_config(tmp_path, hm_server_url=hm.base_url))
        try:
            body = await wait_health(running, lambda b: b["hmServer"]["reachable"] is not None)
            assert body["hmServer"] == {"reachable": True, "publications": {"pending": 0, "failed": 0}}
            assert ("GET", "/api/Account?id=z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK") in hm.requests
        finally:
            await running.stop()
    assert [r.getMessage() for r in caplog.records if "Seed hypermedia server" in r.getMessage()] == [
        f"the Seed hypermedia server at {hm.base_url} answers"]


async def test_offline_says_so_in_health(tmp_path):
    running = await start_server(make_config(tmp_path))
    try:
        body = await health(running)
        assert body["hmServer"] == {"offline": True} and "hmServerUrl" not in body
        assert body["searches"] == {"seed": False, "memory": True, "web": False}
    finally:
        await running.stop()


async def test_an_identity_made_while_the_hm_server_is_down_is_queued_and_goes_up_after_a_restart(tmp_path):
    """Made (and renamed) while nothing answers: kept, queued in order, shown pending; the next
    start, with the HM server there, sends the queue by itself: the account, then the rename."""
    from tests.wsraw import V2Client, keypair

    kp = keypair("outage")
    port = free_port()
    url = f"http://127.0.0.1:{port}"   # nothing listens there yet
    running = await start_server(make_config(tmp_path, hm_server_url=url, hm_server_timeout=2.0,
                                             hm_publish_retry=60.0))
    try:
        c = await V2Client.open(running.url)
        made = await c.call(kp, {"_": "CreateSigningIdentity", "label": "Made offline"})
        assert made["_"] == "CreateSigningIdentityResponse", made
        assert "serverUrl" not in made["identity"]
        pending = made["identity"]["pendingPublications"]
        assert [(p["what"], p["status"], p["attempts"]) for p in pending] == [("the new account", "pending", 1)]
        assert pending[0]["lastError"].startswith("Failed to publish the agent account: the Seed hypermedia server "
                                                  f"at {url} could not be reached")
        name = made["identity"]["name"]
        renamed = await c.call(kp, {"_": "UpdateSigningIdentity", "name": name, "label": "Renamed offline"})
        assert renamed["_"] == "UpdateSigningIdentityResponse", renamed   # not a 502
        assert renamed["identity"]["label"] == "Renamed offline"
        assert [p["what"] for p in renamed["identity"]["pendingPublications"]] == ["the new account", "the profile"]
        body = await wait_health(running, lambda b: b["hmServer"].get("publications", {}).get("pending") == 2)
        assert body["hmServer"]["reachable"] is False
        await c.close()
    finally:
        await running.stop()
    async with FakeHmServer(port=port) as hm:
        running = await start_server(make_config(tmp_path, hm_server_url=url, hm_publish_retry=60.0))
        try:
            c = await V2Client.open(running.url)
            await wait_health(running, lambda b: b["hmServer"].get("publications") == {"pending": 0, "failed": 0}
                              and len(hm.published) == 2)
            # In order, each once: the whole account first, then the rename's profile.
            assert [[b.type for b in call] for call in hm.published] == [["Profile", "Change", "Change", "Ref"],
                                                                          ["Profile"]]
            assert hm.profile(made["identity"]["accountId"])["name"] == "Renamed offline"
            listed = (await c.call(kp, {"_": "ListSigningIdentities"}))["identities"]
            assert [(i["label"], i.get("serverUrl"), "pendingPublications" in i) for i in listed] == [
                ("Renamed offline", url, False)]
            # A refusal for good (4xx) is still a 502, and nothing is stored or queued.
            hm.fail("reject")
            refused = await c.call(kp, {"_": "CreateSigningIdentity", "label": "Refused"})
            assert refused["_"] == "Error" and refused["status"] == 502, refused
            assert len((await c.call(kp, {"_": "ListSigningIdentities"}))["identities"]) == 1
            await c.close()
        finally:
            await running.stop()

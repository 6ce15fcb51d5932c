"""server/hypermedia/client.py against the fake HM server (tests/fakes/hm_server.py) over real loopback
HTTP: publishing, and every way the server can fail becoming one clear HmError."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm import hm_blobs
from seed_agents.protocol.hm.unixfs import file_blobs
from seed_agents.server.hypermedia.client import HmClient, HmError, search_params
from seed_agents.server.providers.network import NetworkPolicy, provider_client

from tests.fakes.hm_server import FAILURES, REFUSAL_SECRET, FakeHmProcess, FakeHmServer, fake_hm_in_thread
from tests.hm_vectors import block_ids, load

SEED = bytes(range(32))
TS = 1_767_225_600_000


@pytest.fixture
async def hm():
    async with FakeHmServer() as fake:
        yield fake


async def test_publish_blobs_sends_one_call_the_fake_checks_and_stores(hm):
    blobs = hm_blobs.new_account_blobs(SEED, "Agent", TS)
    async with HmClient(hm.base_url) as client:
        cids = await client.publish_blobs(blobs)
    assert cids == [b.cid for b in blobs]
    assert [[b.cid for b in call] for call in hm.published] == [cids]
    assert [b.type for b in hm.published[0]] == ["Profile", "Change", "Change", "Ref"]
    assert hm.profile(hm_blobs.account_id(SEED))["name"] == "Agent"
    method, target = hm.requests[0]
    assert (method, target) == ("POST", "/api/PublishBlobs")


async def test_publish_blobs_body_is_the_library_request_encoding(hm):
    vector = load("accounts")["creation"][0]
    seed = bytes.fromhex(vector["seed"])
    blobs = hm_blobs.new_account_blobs(seed, vector["name"], vector["ts"], new_id=block_ids(vector["randomSeed"]))
    seen = []
    async def capture(request: httpx.Request):
        seen.append(request)
    async with httpx.AsyncClient(event_hooks={"request": [capture]}) as http:
        await HmClient(hm.base_url, http).publish_blobs(blobs)
    request = seen[0]
    assert request.headers["content-type"] == "application/cbor"
    assert request.headers["accept"] == "application/json"
    body = dagcbor.decode(request.content)
    assert body == {"blobs": [{"cid": b.cid, "data": b.data} for b in blobs]}


async def test_unixfs_icon_then_profile(hm):
    icon = b"\x89PNG\r\n\x1a\n" + bytes(300_000)
    root, blobs = file_blobs(icon)
    async with HmClient(hm.base_url) as client:
        assert await client.publish_file(icon) == root
        await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Agent", TS, root))
    assert [[b.cid for b in call] for call in hm.published[:1]] == [[b.cid for b in blobs]]
    assert hm.get(root) is not None
    assert hm.profile(hm_blobs.account_id(SEED))["avatar"] == f"ipfs://{root}"


@pytest.mark.parametrize("kind, phrase", [
    ("refuse", "refused the request with HTTP 500"),
    ("garbage", "answered something that is not JSON"),
    ("wrong-shape", "answered something that is not a PublishBlobs answer"),
    ("huge", "answered more than"),
    ("huge-stream", "answered more than"),
    ("drop", "could not be reached"),
    ("hang", "did not answer within 0.5 s"),
])
async def test_each_server_failure_is_one_clear_error(hm, kind, phrase):
    assert kind in FAILURES
    hm.fail(kind)
    # Only the hanging server needs the short timeout; the others answer at once, and a busy
    # machine must not turn their answer into a timeout.
    async with HmClient(hm.base_url, timeout=0.5 if kind == "hang" else 10) as client:
        with pytest.raises(HmError) as err:
            await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Agent", TS))
    message = str(err.value)
    assert phrase in message and hm.base_url in message
    assert REFUSAL_SECRET not in message and "hm-secret" not in message
    assert hm.published == []  # nothing was stored


async def test_a_server_that_is_not_there(unused_tcp_port):
    async with HmClient(f"http://127.0.0.1:{unused_tcp_port}") as client:
        with pytest.raises(HmError, match="could not be reached: it refused the connection"):
            await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Agent", TS))


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:1", "http://[::1", "no scheme"])
async def test_an_unusable_server_url(url):
    async with HmClient(url) as client:
        with pytest.raises(HmError, match="not an http"):
            await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Agent", TS))


async def test_the_network_policy_applies(hm):
    async with HmClient(hm.base_url, provider_client(NetworkPolicy.parse("public"))) as client:
        with pytest.raises(HmError, match="network policy refuses"):
            await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Agent", TS))
    assert hm.requests == []


async def test_the_fake_refuses_a_bad_signature_or_a_wrong_cid_and_stores_nothing(hm):
    good, genesis, change, ref = hm_blobs.new_account_blobs(SEED, "Agent", TS)
    value = dagcbor.decode(change.data)
    value["ts"] += 1  # the signature no longer holds
    forged = dagcbor.encode(value)
    async with HmClient(hm.base_url) as client:
        with pytest.raises(HmError, match="HTTP 400"):
            await client.publish_blobs([good, hm_blobs.Blob(hm_blobs.blob_cid(forged), forged)])
        with pytest.raises(HmError, match="HTTP 400"):
            await client.publish_blobs([good, hm_blobs.Blob(genesis.cid, change.data)])
    assert hm.blobs == {} and hm.published == []


def test_query_strings_are_url_search_params():
    assert search_params({"id": "hm://z6Mk/a b?v=x~y*"}) == "id=hm%3A%2F%2Fz6Mk%2Fa+b%3Fv%3Dx%7Ey*"


async def test_the_fake_runs_as_a_child_process_with_the_vectors():
    fake = await asyncio.to_thread(FakeHmProcess, vectors=True)
    try:
        vector = load("accounts")["creation"][0]
        async with HmClient(fake.base_url) as client:
            account = await client.account(vector["accountId"])
            assert account["type"] == "account" and account["metadata"]["name"] == vector["name"]
            await client.publish_blobs(hm_blobs.profile_blobs(SEED, "Child", TS))
            published = await asyncio.to_thread(fake.published)
            assert [(b["type"], b["value"]["name"]) for b in published[0]] == [("Profile", "Child")]
            await asyncio.to_thread(fake.fail, "refuse")
            with pytest.raises(HmError, match="HTTP 500"):
                await client.account(vector["accountId"])
    finally:
        fake.close()


def test_the_fake_runs_in_a_thread_for_synchronous_tests():
    with fake_hm_in_thread() as hm:
        answer = httpx.post(f"{hm.base_url}/api/PublishBlobs", timeout=5,
                            headers={"Content-Type": "application/cbor"},
                            content=dagcbor.encode({"blobs": [{"cid": b.cid, "data": b.data}
                                                              for b in hm_blobs.profile_blobs(SEED, "Sync", TS)]}))
        assert answer.status_code == 200 and answer.json()["json"]["cids"]
        assert hm.profile(hm_blobs.account_id(SEED))["name"] == "Sync"

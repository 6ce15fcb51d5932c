"""The publication queue (server/hypermedia/publications.py): what the Seed hypermedia server did
not take is kept in the store and sent once it does, exactly once, in order, from whichever server
holds the work, across a SIGKILL and a restart; health and ListSigningIdentities show what waits.

Over real sockets: a real server (in this process, or child processes on one PostgreSQL), the
fake HM server on a port nothing listens on until the test starts it there.
"""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from seed_agents.server.config import Config
from seed_agents.server.main import start_server

from tests.conftest import server_config
from tests.fakes.hm_server import FakeHmServer
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.procs import ServerProcess, free_port
from tests.repo.test_docs_limits import documented_default
from tests.server.hypermedia.test_hm_agent_writes import call, make_agent, open_session, run_turn
from tests.wsraw import V2Client, keypair


async def health(http_url: str) -> dict:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{http_url}/api/health", timeout=5)).json()


async def until(check, timeout: float = 30.0, step: float = 0.05):
    """Wait for `check()` (awaitable or not) to be truthy; its value."""
    async with asyncio.timeout(timeout):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(step)


def calls_by_account(hm: FakeHmServer) -> dict[str, list[list[str]]]:
    """Each accepted PublishBlobs call's blob types, by the account that signed its first blob."""
    from seed_agents.protocol.wire.principals import principal_to_string

    out: dict[str, list[list[str]]] = {}
    for batch in hm.published:
        signers = [b.value.get("signer") for b in batch if isinstance(b.value, dict) and b.value.get("signer")]
        out.setdefault(principal_to_string(signers[0]), []).append([b.type for b in batch])
    return out


@pytest.mark.storages("sqlite", "postgresql")
async def test_an_outage_queues_identities_and_documents_and_sends_each_once_in_order(tmp_path, storage, request):
    port = free_port()
    url = f"http://127.0.0.1:{port}"   # nothing listens there until the HM server "comes back"
    running = await start_server(server_config(tmp_path, storage, request, allow_provider_base_url=True,
                                               hm_server_url=url, hm_server_timeout=2.0, hm_publish_retry=0.2))
    try:
        kp = keypair("outage-writer")
        c = await V2Client.open(running.url)
        me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Scribe"}))["identity"]
        assert "serverUrl" not in me and [p["what"] for p in me["pendingPublications"]] == ["the new account"]
        renamed = await c.call(kp, {"_": "UpdateSigningIdentity", "name": me["name"], "label": "Scribe II"})
        assert renamed["_"] == "UpdateSigningIdentityResponse", renamed   # a rename offline: no 502
        doc = f"hm://{me['accountId']}/outage-notes"
        async with FakeOpenAI() as fake:
            agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"])
            sid = await open_session(c, kp, agent_id)
            fake.enqueue(Script(chunks=[], tool_calls=[
                call("w1", "write", {"address": doc, "content": "First draft.", "options": {"name": "Outage notes"}}),
                call("w2", "write", {"address": doc, "content": "Second draft.", "options": {"action": "update"}})]),
                Script(chunks=["queued"]))
            results = await run_turn(c, kp, sid)
        first, second = (r["output"] for r in results)
        # Behind its identity's account, untried (the account goes first), then behind itself.
        assert first["command"] == "document.create" and first["status"] == "queued" and first["id"] == doc
        assert first["publication"]["status"] == "pending" and "lastError" not in first["publication"]
        assert "still waiting to be published" in first["summary"]
        assert second["command"] == "document.update" and second["status"] == "queued"
        listed = (await c.call(kp, {"_": "ListSigningIdentities"}))["identities"][0]
        assert [p["what"] for p in listed["pendingPublications"]] == [
            "the new account", "the profile", f"the document {doc}", f"the document {doc}"]
        assert [p.get("subject") for p in listed["pendingPublications"]][2:] == [doc, doc]
        body = await until(lambda: _pending(running.http_url, 4))
        assert body["hmServer"]["reachable"] is False

        async with FakeHmServer(port=port) as hm:
            await until(lambda: _pending(running.http_url, 0), 60)
            # Each once, in order: the account, its rename, then the document and its update.
            assert calls_by_account(hm) == {me["accountId"]: [["Profile", "Change", "Change", "Ref"], ["Profile"],
                                                              ["Change", "Change", "Ref"], ["Change", "Ref"]]}
            assert hm.profile(me["accountId"])["name"] == "Scribe II"
            read = await c.call(kp, {"_": "ListSigningIdentities"})
            assert read["identities"][0]["serverUrl"] == url and "pendingPublications" not in read["identities"][0]
            resource = json.loads((await _get(f"{url}/api/Resource?id={doc}")))["json"]
            assert resource["document"]["metadata"]["name"] == "Outage notes"
            assert "Second draft." in json.dumps(resource["document"]["content"])
            sent = len(hm.published)
            await asyncio.sleep(1.0)   # (retries every 0.2 s were the queue still holding anything)
            assert len(hm.published) == sent
        await c.close()
    finally:
        await running.stop()


async def _get(url: str) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(url, timeout=5)).text


async def _pending(http_url: str, n: int) -> dict | None:
    body = await health(http_url)
    return body if body["hmServer"].get("publications", {}).get("pending") == n else None


@pytest.mark.storages("sqlite", "postgresql")
async def test_a_refusal_is_kept_as_failed_and_a_revoked_grant_publishes_nothing(tmp_path, storage, request):
    """A 4xx ends an item as failed (shown, never retried); a document queued by an agent whose
    owner then takes away the publish grant is not published when the server is back."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    running = await start_server(server_config(tmp_path, storage, request, allow_provider_base_url=True,
                                               hm_server_url=url, hm_server_timeout=2.0, hm_publish_retry=0.2))
    try:
        kp = keypair("revoked")
        c = await V2Client.open(running.url)
        async with FakeHmServer(port=port) as hm:
            me = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Granted"}))["identity"]
            assert me["serverUrl"] == url
        doc = f"hm://{me['accountId']}/revoked"
        async with FakeOpenAI() as fake:
            agent_id = await make_agent(c, kp, fake.base_url, signingKey=me["name"], tools=["publish"])
            fake.enqueue(Script(chunks=[], tool_calls=[
                call("w", "write", {"address": doc, "content": "Not yet.", "options": {"name": "Revoked"}})]),
                Script(chunks=["ok"]))
            results = await run_turn(c, kp, await open_session(c, kp, agent_id))
        assert results[0]["output"]["status"] == "queued", results
        r = await c.call(kp, {"_": "UpdateAgent", "agentId": agent_id, "definition": {
            "name": "Writer", "systemPrompt": "You publish.", "modelProvider": "p", "model": "m",
            "signingKey": me["name"], "tools": ["search"]}})
        assert r["_"] == "GetAgentResponse", r
        async with FakeHmServer(port=port) as hm:
            body = await until(lambda: _failed(running.http_url, 1), 60)
            assert body["hmServer"]["publications"]["pending"] == 0
            assert hm.published == []
            item = (await c.call(kp, {"_": "ListSigningIdentities"}))["identities"][0]["pendingPublications"][0]
            assert item["status"] == "failed" and item["lastError"] == f"the agent may no longer publish as {me['name']}"
            # A rename the server refuses for good while it is queued: failed, not retried.
            hm.fail("drop", times=1000)   # nothing answers
            queued = await c.call(kp, {"_": "UpdateSigningIdentity", "name": me["name"], "label": "Refused"})
            assert queued["identity"]["pendingPublications"][-1]["status"] == "pending"
            hm.failures.clear()   # (no await in between: the queue's next try meets the refusal)
            hm.fail("reject", times=1)
            await until(lambda: _failed(running.http_url, 2), 60)
            assert hm.published == []
        await c.close()
    finally:
        await running.stop()


async def _failed(http_url: str, n: int) -> dict | None:
    body = await health(http_url)
    return body if body["hmServer"].get("publications", {}).get("failed") == n else None


async def test_two_servers_on_one_database_send_each_item_once_one_killed(tmp_path, postgres_url):  # noqa: F811
    """Identities created on both servers during an outage; the one that made half of them is
    SIGKILLed; once the HM server answers, the survivor sends everything, each once, in order."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    extra = ["--storage-url", postgres_url, "--hm-server-url", url, "--hm-server-timeout", "2",
             "--hm-publish-retry", "0.3", "--rate-limit", "100000", "--rate-burst", "100000",
             "--log-level", "WARNING"]
    servers = [ServerProcess(tmp_path / f"s{i}", extra=extra).start() for i in range(2)]
    try:
        made = []
        for i in range(6):
            kp = keypair(f"cluster-{i}")
            c = await V2Client.open(servers[i % 2].url)
            identity = (await c.call(kp, {"_": "CreateSigningIdentity", "label": f"Id {i}"}))["identity"]
            renamed = await c.call(kp, {"_": "UpdateSigningIdentity", "name": identity["name"], "label": f"Id {i}b"})
            assert renamed["_"] == "UpdateSigningIdentityResponse", renamed
            made.append((kp, identity))
            await c.close()
        servers[1].kill()   # SIGKILL: its items (and any lease it held) are the survivor's now
        survivor = f"http://127.0.0.1:{servers[0].port}"
        async with FakeHmServer(port=port) as hm:
            await until(lambda: _pending(survivor, 0), 90, step=0.2)
            by_account = calls_by_account(hm)
            assert by_account == {identity["accountId"]: [["Profile", "Change", "Change", "Ref"], ["Profile"]]
                                  for _, identity in made}
            for i, (_, identity) in enumerate(made):
                assert hm.profile(identity["accountId"])["name"] == f"Id {i}b"
            sent = len(hm.published)
            servers[1].start()   # back: nothing left to send twice
            await asyncio.sleep(1.5)
            assert len(hm.published) == sent
            kp, identity = made[1]
            c = await V2Client.open(servers[1].url)
            listed = (await c.call(kp, {"_": "ListSigningIdentities"}))["identities"]
            assert listed[0]["serverUrl"] == url and "pendingPublications" not in listed[0]
            await c.close()
    finally:
        for srv in servers:
            srv.kill()


def test_the_production_backoff_and_timeout_are_the_documented_ones():
    """The tests here back off from 0.05-0.3 s and time out at 1-2 s; a server not told otherwise
    waits 10 s after a first failed try and gives the HM server 15 s (docs/operations.md)."""
    assert Config().hm_publish_retry == documented_default("--hm-publish-retry") == 10
    assert Config().hm_server_timeout == documented_default("--hm-server-timeout") == 15


async def test_a_hostile_hm_server_costs_one_bounded_try_each_and_publishes_nothing_twice(tmp_path):
    """Hangs, garbage, huge answers and a slow drip while the queue sends: each a bounded failed
    try (the next after its backoff), then everything goes once. The backoff starts at 0.05 s:
    six failures in a row wait 0.05 x (1 + 2 + ... + 32) = 3.2 s in all (12.6 s at 0.2 s)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = ServerProcess(tmp_path / "srv", extra=["--hm-server-url", url, "--hm-server-timeout", "1",
                                                  "--hm-publish-retry", "0.05"]).start()
    survivor = f"http://127.0.0.1:{proc.port}"
    try:
        kp = keypair("hostile-queue")
        c = await V2Client.open(proc.url)
        identity = (await c.call(kp, {"_": "CreateSigningIdentity", "label": "Patient"}))["identity"]
        assert [p["what"] for p in identity["pendingPublications"]] == ["the new account"]
        async with FakeHmServer(port=port) as hm:
            for kind in ("hang", "garbage", "huge-stream", "slow-drip", "refuse", "wrong-shape"):
                hm.fail(kind)
            # Health's figures are the queue's last look: until its first since the identity was
            # made they say 0 pending (it was once taken for "all sent" while the first try hung).
            # After the failures, each a pass of its own, 0 means sent.
            await until(lambda: not hm.failures and _pending(survivor, 0), 90, step=0.2)
            assert not hm.failures   # every failure was met
            assert calls_by_account(hm) == {identity["accountId"]: [["Profile", "Change", "Change", "Ref"]]}
            item_errors = proc.log.read_text()
            assert "token=hm-secret" not in item_errors   # the server's answer is never repeated
        await c.close()
    finally:
        proc.kill()


async def test_a_server_killed_with_work_queued_sends_it_after_its_restart(tmp_path):
    """SQLite, one server child: identities made during an outage, the server SIGKILLed, started
    again with the HM server back: everything goes once, in order; nothing is lost."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    extra = ["--hm-server-url", url, "--hm-server-timeout", "1", "--hm-publish-retry", "0.3"]
    proc = ServerProcess(tmp_path / "srv", extra=extra).start()
    try:
        made = []
        for i in range(3):
            kp = keypair(f"killed-{i}")
            c = await V2Client.open(proc.url)
            identity = (await c.call(kp, {"_": "CreateSigningIdentity", "label": f"K{i}"}))["identity"]
            renamed = await c.call(kp, {"_": "UpdateSigningIdentity", "name": identity["name"], "label": f"K{i}b"})
            assert renamed["_"] == "UpdateSigningIdentityResponse", renamed
            made.append(identity)
            await c.close()
        proc.kill()   # SIGKILL, with six publications waiting
        async with FakeHmServer(port=port) as hm:
            proc.start()
            await until(lambda: _pending(f"http://127.0.0.1:{proc.port}", 0), 60, step=0.2)
            assert calls_by_account(hm) == {i["accountId"]: [["Profile", "Change", "Change", "Ref"], ["Profile"]]
                                            for i in made}
            assert [hm.profile(i["accountId"])["name"] for i in made] == ["K0b", "K1b", "K2b"]
    finally:
        proc.kill()

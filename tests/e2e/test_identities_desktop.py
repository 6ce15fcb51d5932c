"""Signing identities as the Seed desktop uses them, over HTTP against real server child
processes: one publishing to a fake Seed hypermedia server (tests/fakes/hm_server.py, which
decodes and checks every blob), one with no HM server. The desktop's dialog order, then hostile
input: each gets one clear error and nothing is half stored or half published."""
from __future__ import annotations

import asyncio
import os
import struct
import time
import uuid
import zlib

import httpx
import pytest

from seed_agents.protocol.hm import hm_blobs
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.protocol.wire.keys import Keypair

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.hm_server import REFUSAL_SECRET, FakeHmServer
from tests.fakes.sse_base import Script
from tests.httpraw import post
from tests.pg import PG_URL_ENV, with_schema
from tests.procs import ServerProcess, free_port
from tests.wsraw import keypair

HM_TIMEOUT = 1.0   # --hm-server-timeout of the publishing server: a hanging HM server costs this


def tiny_png() -> bytes:
    """A real 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00\xff")) + chunk(b"IEND", b""))


class Desk:
    """One account acting over HTTP as the desktop does (each action signed anew, ts rising)."""

    def __init__(self, http: httpx.AsyncClient, base: str, kp: Keypair) -> None:
        self.http, self.base, self.kp, self.last = http, base, kp, 0

    async def act(self, action: dict) -> tuple[int, dict]:
        self.last = max(int(time.time() * 1000), self.last + 1)
        return await post(self.http, self.base, sign_envelope(self.kp, action, ts=self.last))

    async def ok(self, action: dict) -> dict:
        status, value = await self.act(action)
        assert status == 200, value
        return value

    async def refused(self, action: dict, status: int) -> str:
        got, value = await self.act(action)
        assert (got, value["_"]) == (status, "Error"), value
        return value["message"]

    async def identities(self, agent_id: str | None = None) -> list[dict]:
        action = {"_": "ListSigningIdentities", **({"agentId": agent_id} if agent_id else {})}
        return (await self.ok(action))["identities"]


@pytest.fixture(scope="module")
def hm_port() -> int:
    return free_port()


def _server(tmp_path_factory, name: str, extra: list[str]):
    proc = ServerProcess(tmp_path_factory.mktemp(name), extra=["--allow-provider-base-url", "true", *extra])
    proc.start()
    return proc


@pytest.fixture(scope="module")
def publishing(tmp_path_factory, hm_port):
    proc = _server(tmp_path_factory, "hm", ["--hm-server-url", f"http://127.0.0.1:{hm_port}",
                                             "--hm-server-timeout", str(HM_TIMEOUT),
                                             # the queue's retries must not take a failure a test
                                             # scripts for an action (tests/server/hypermedia/test_hm_publications.py
                                             # tests the queue)
                                             "--hm-publish-retry", "3600"])
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """No HM server; on PostgreSQL where one is configured (SEED_AGENTS_TEST_POSTGRES_URL), so
    the identities' SQL runs through a real server on both stores, else on SQLite."""
    url = os.environ.get(PG_URL_ENV, "").strip()
    schema = None
    if url:
        import psycopg

        schema = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    proc = _server(tmp_path_factory, "local", ["--storage-url", with_schema(url, schema)] if schema else [])
    yield proc
    proc.kill()
    if schema:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
async def hm(hm_port):
    """The fake HM server, on the port the publishing server was told."""
    async with FakeHmServer(port=hm_port) as fake:
        yield fake


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=20) as client:
        yield client


def desk(http, proc, label: str) -> Desk:
    return Desk(http, f"http://127.0.0.1:{proc.port}", keypair(f"{label}-{uuid.uuid4()}"))


def prompt(text: str) -> list[dict]:
    """A block-tree system prompt as the desktop's editor sends it."""
    return [{"block": {"id": "h1", "type": "Heading", "text": "Role", "annotations": [], "attributes": {}},
             "children": [{"block": {"id": "p1", "type": "Paragraph", "text": text, "annotations": [],
                                     "attributes": {}}}]}]


# -- the desktop's dialog order ---------------------------------------------------------------


@pytest.mark.parametrize("with_hm", [True, False], ids=["hm-server", "no-hm-server"])
async def test_the_desktop_creates_and_edits_an_agent(request, http, hm, with_hm):
    proc = request.getfixturevalue("publishing" if with_hm else "local")   # (the local one never calls hm)
    d = desk(http, proc, "desktop")
    async with FakeAnthropic(Script(chunks=["hi"]), key="sk-ant") as anthropic:
        await d.ok({"_": "SetSecret", "name": "anthropic-key", "value": b"sk-ant"})
        await d.ok({"_": "SetModelProvider", "name": "Claude", "provider": {
            "type": "anthropic", "baseUrl": anthropic.base_url, "secretRefs": {"apiKey": "anthropic-key"}}})

        # 1. The Create agent dialog lists providers, then the chosen provider's models.
        providers = (await d.ok({"_": "ListModelProviders"}))["providers"]
        assert {p["name"] for p in providers} == {"echo", "Claude"}
        models = (await d.ok({"_": "ListProviderModels", "provider": "Claude"}))["models"]
        model = next(m["id"] for m in models if m["id"] == "claude-sonnet-4-5")

    # 2. An account for the agent (handleCreateAgent), then the agent signing with it.
    create = {"_": "CreateSigningIdentity", "label": "Researcher", "clientRequestId": str(uuid.uuid4())}
    identity = (await d.ok(create))["identity"]
    assert identity["name"] == "hm-account-" + identity["accountId"][:16]
    assert identity["label"] == "Researcher" and identity["createdAt"] == identity["updatedAt"]
    assert set(identity) == {"id", "name", "accountId", "label", "createdAt", "updatedAt"} | (
        {"serverUrl"} if with_hm else set())
    if with_hm:
        assert identity["serverUrl"] == hm.base_url
        [call] = hm.published   # one PublishBlobs: profile, genesis, home change, ref
        assert [b.type for b in call] == ["Profile", "Change", "Change", "Ref"]
        assert hm.profile(identity["accountId"])["name"] == "Researcher"
        home = hm._resource(hm_id_of(identity["accountId"]))
        assert home["type"] == "document" and home["document"]["metadata"]["name"] == "Researcher"
    # The desktop's retry of the same request: the same answer, no second key, nothing republished.
    assert (await d.ok(create))["identity"] == identity
    assert [i["name"] for i in await d.identities()] == [identity["name"]]
    if with_hm:
        assert len(hm.published) == 1

    definition = {"name": "Researcher", "systemPrompt": prompt("You research."), "modelProvider": "Claude",
                  "model": model, "tools": ["read", "write"], "signingKey": identity["name"],
                  "signingKeys": [identity["name"]], "enabledModels": [{"provider": "Claude", "model": model}],
                  "metadata": {"createdFrom": "desktop-agents-page"}}
    agent_id = (await d.ok({"_": "CreateAgent", "definition": definition,
                            "clientRequestId": str(uuid.uuid4())}))["agentId"]

    # 3. The agent editor: GetAgent, then UpdateAgent with a changed block prompt and a level.
    got = await d.ok({"_": "GetAgent", "agentId": agent_id})
    assert got["agent"]["definition"] == definition
    edited = {**got["agent"]["definition"], "systemPrompt": prompt("You research, carefully."),
              "reasoningLevel": "high"}
    updated = await d.ok({"_": "UpdateAgent", "agentId": agent_id, "definition": edited})
    # The reference's answer, which the desktop writes into its cache as it is.
    assert updated["_"] == "GetAgentResponse" and set(updated) == {"_", "agent", "sessions"}
    assert updated["agent"]["definition"] == edited and updated["agent"]["id"] == agent_id
    assert updated["agent"]["accessRole"] == "owner"
    session_id = (await d.ok({"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    markdown = (await d.ok({"_": "GetSession", "sessionId": session_id}))["systemPromptMarkdown"]
    assert "You research, carefully." in markdown and "Role" in markdown

    # 4. The Agents page polls the identities.
    assert await d.identities() == [identity]

    # Renaming republishes the profile; an icon goes up as UnixFS in the same call.
    renamed = (await d.ok({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "Scholar"}))["identity"]
    assert renamed["label"] == "Scholar" and renamed["id"] == identity["id"]
    if with_hm:
        assert hm.profile(identity["accountId"])["name"] == "Scholar" and len(hm.published) == 2
        png = tiny_png()
        iconed = (await d.ok({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "Scholar",
                              "icon": {"data": png, "mimeType": "image/png", "fileName": "a.png"}}))["identity"]
        root, _ = hm_blobs_unixfs(png)
        assert iconed["icon"] == f"ipfs://{root}" and hm.get(root) is not None
        assert hm.profile(identity["accountId"])["avatar"] == iconed["icon"]
        assert [b.type for b in hm.published[-1]][-1] == "Profile" and len(hm.published) == 3
        # A later rename keeps the icon on the new profile.
        await d.ok({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "Scholar II"})
        assert hm.profile(identity["accountId"])["avatar"] == iconed["icon"]
    else:
        message = await d.refused({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "x",
                                   "icon": {"data": tiny_png()}}, 400)
        assert "needs an HM server" in message
        assert (await d.identities())[0]["label"] == "Scholar"


def hm_id_of(account_id: str):
    from seed_agents.protocol.hm.hm_ids import parse_hm_id

    return parse_hm_id(f"hm://{account_id}")


def hm_blobs_unixfs(data: bytes):
    from seed_agents.protocol.hm import unixfs

    return unixfs.file_blobs(data)


# -- hostile input ----------------------------------------------------------------------------


async def test_bad_seeds_labels_and_icons_are_refused_and_store_nothing(publishing, hm, http):
    d = desk(http, publishing, "hostile")
    for seed, said in [(b"\x01" * 31, "must be exactly 32 bytes, got 31"),
                       (b"\x01" * 33, "must be exactly 32 bytes, got 33"),
                       ("a" * 64, "must be the 32 bytes of an Ed25519 seed, got text")]:
        message = await d.refused({"_": "ImportSigningIdentity", "seed": seed}, 400)
        assert message.startswith("ImportSigningIdentity.seed ") and said in message, message
    message = await d.refused({"_": "CreateSigningIdentity", "label": "x" * 1_000_000}, 400)
    assert message == "CreateSigningIdentity.label must be text of at most 200 characters, got 1000000"
    message = await d.refused({"_": "CreateSigningIdentity", "label": "evil\x1b[2Jname"}, 400)
    assert "control characters" in message
    assert await d.identities() == [] and hm.published == []

    identity = (await d.ok({"_": "CreateSigningIdentity", "label": "Ok"}))["identity"]
    for data, what in [(b"%PDF-1.7\n" + b"\0" * 64, "application/pdf"),
                       (b"<svg onload=alert(1)>", "no image format known here"),
                       (b"just text, not a picture", "no image format known here")]:
        message = await d.refused({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "New",
                                   "icon": {"data": data, "mimeType": "image/png"}}, 400)
        assert message.startswith("UpdateSigningIdentity.icon.data must be an image") and what in message
    message = await d.refused({"_": "UpdateSigningIdentity", "name": identity["name"], "label": "New",
                               "icon": {"data": b"\x89PNG" + b"\0" * (1 << 20)}}, 413)   # past the frame limit
    assert "over the limit of 1048576" in message
    assert await d.identities() == [identity] and len(hm.published) == 1

    # Import publishes nothing; the same key twice is a conflict, not a second row.
    seed = bytes(range(32))
    imported = (await d.ok({"_": "ImportSigningIdentity", "seed": seed, "label": "Mine"}))["identity"]
    assert imported["accountId"] == hm_blobs.account_id(seed) and len(hm.published) == 1
    message = await d.refused({"_": "ImportSigningIdentity", "seed": seed}, 409)
    assert hm_blobs.account_id(seed) in message
    listed = await d.identities()
    assert [i["name"] for i in listed] == [imported["name"], identity["name"]]
    assert all("seed" not in i and seed.hex() not in repr(i) for i in listed)
    # Sealed at rest: the seed is in no file of the server (database, WAL, log).
    for path in publishing.data_dir.rglob("*"):
        if path.is_file() and path.name != "secrets.key":
            data = path.read_bytes()
            assert seed not in data and seed.hex().encode() not in data, path


@pytest.mark.parametrize("kind", ["hang", "drop"])
async def test_an_hm_server_that_does_not_answer_leaves_the_identity_here_unpublished(publishing, hm, http, kind):
    """Beyond the reference: no answer at all (no connection, a timeout) is no reason to refuse a
    key; it is kept without a serverUrl and its publication queued (tests/server/hypermedia/test_hm_publications.py)."""
    d = desk(http, publishing, f"hm-down-{kind}")
    hm.fail(kind)
    started = time.monotonic()
    made = (await d.ok({"_": "CreateSigningIdentity", "label": "Kept", "clientRequestId": "one"}))["identity"]
    assert time.monotonic() - started < HM_TIMEOUT + 5
    assert "serverUrl" not in made and hm.published == []
    assert [p["what"] for p in made["pendingPublications"]] == ["the new account"]
    assert [i["id"] for i in await d.identities()] == [made["id"]]
    # Deleted, its queued publication goes with it (and cannot take another test's scripted failure).
    await d.ok({"_": "DeleteSigningIdentity", "name": made["name"]})


@pytest.mark.parametrize("kind", ["reject", "garbage", "wrong-shape", "huge"])
async def test_an_hm_server_failure_is_a_502_naming_it_and_stores_nothing(publishing, hm, http, kind):
    d = desk(http, publishing, f"hm-{kind}")
    hm.fail(kind)
    started = time.monotonic()
    message = await d.refused({"_": "CreateSigningIdentity", "label": "Doomed",
                               "clientRequestId": "one"}, 502)
    assert time.monotonic() - started < HM_TIMEOUT + 5
    assert message.startswith("Failed to publish the agent account: the Seed hypermedia server at "
                              f"{hm.base_url} "), message
    assert REFUSAL_SECRET not in message and "<html>" not in message
    assert await d.identities() == [] and hm.published == []
    # The same request again, once the HM server is back: created then, once.
    created = (await d.ok({"_": "CreateSigningIdentity", "label": "Doomed", "clientRequestId": "one"}))["identity"]
    assert [i["id"] for i in await d.identities()] == [created["id"]]

    # A rename the HM server refuses changes nothing here either.
    hm.fail(kind)
    message = await d.refused({"_": "UpdateSigningIdentity", "name": created["name"], "label": "Renamed"}, 502)
    assert "Failed to publish the agent account profile" in message and hm.base_url in message
    assert await d.identities() == [created]
    assert hm.profile(created["accountId"])["name"] == "Doomed"


async def test_no_deleting_a_key_an_agent_signs_with(local, http):
    d = desk(http, local, "delete")
    identity = (await d.ok({"_": "CreateSigningIdentity", "label": "Scribe"}))["identity"]
    name = identity["name"]
    definition = {"name": "Scribe agent", "systemPrompt": "x", "modelProvider": "echo", "model": "echo",
                  "signingKeys": [name]}
    agent_id = (await d.ok({"_": "CreateAgent", "definition": definition}))["agentId"]
    message = await d.refused({"_": "DeleteSigningIdentity", "name": name}, 409)
    assert f"is still used by agent 'Scribe agent' ({agent_id})" in message, message
    assert await d.identities() == [identity]
    # A definition naming an identity the account does not hold is refused.
    message = await d.refused({"_": "CreateAgent", "definition": {**definition, "signingKey": "hm-account-nope"}}, 400)
    assert "'hm-account-nope' is not a signing identity of the agent's owner" in message
    await d.refused({"_": "CreateAgent", "definition": {**definition, "signingKeys": [name, 5]}}, 400)
    # Once no agent uses it, it goes; a second delete is 404.
    await d.ok({"_": "UpdateAgent", "agentId": agent_id, "definition": {**definition, "signingKeys": []}})
    assert (await d.ok({"_": "DeleteSigningIdentity", "name": name})) == {
        "_": "DeleteSigningIdentityResponse", "name": name}
    await d.refused({"_": "DeleteSigningIdentity", "name": name}, 404)
    assert await d.identities() == []


async def test_a_collaborator_can_neither_use_nor_delete_the_owners_identities(local, http):
    owner, guest = desk(http, local, "owner"), desk(http, local, "guest")
    used = (await owner.ok({"_": "CreateSigningIdentity", "label": "Used"}))["identity"]
    private = (await owner.ok({"_": "CreateSigningIdentity", "label": "Private"}))["identity"]
    definition = {"name": "Shared", "systemPrompt": "x", "modelProvider": "echo", "model": "echo",
                  "signingKey": used["name"], "signingKeys": [used["name"]]}
    agent_id = (await owner.ok({"_": "CreateAgent", "definition": definition}))["agentId"]
    await owner.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": guest.kp.account_id,
                    "role": "writer"})
    # Before accepting, the guest cannot list the agent's identities at all.
    await guest.refused({"_": "ListSigningIdentities", "agentId": agent_id}, 404)
    await guest.ok({"_": "AcceptAgentInvite", "agentId": agent_id})

    # Listing: the owner sees all, the collaborator only what the agent's definition names.
    assert {i["name"] for i in await owner.identities(agent_id)} == {used["name"], private["name"]}
    assert await guest.identities(agent_id) == [used]
    assert await guest.identities() == []

    # Using: a writer edits the agent but cannot change which keys it signs with.
    message = await guest.refused({"_": "UpdateAgent", "agentId": agent_id, "definition": {
        **definition, "signingKeys": [used["name"], private["name"]]}}, 403)
    assert "Only the agent owner can change the agent's signing identities" in message
    await guest.ok({"_": "UpdateAgent", "agentId": agent_id, "definition": {**definition, "name": "Renamed"}})
    # Nor give the owner's key to an agent of its own.
    message = await guest.refused({"_": "CreateAgent", "definition": {**definition, "signingKeys": [private["name"]],
                                                                    "signingKey": private["name"]}}, 400)
    assert "is not a signing identity of the agent's owner" in message

    # Deleting or renaming the owner's identities: not the guest's to find.
    for action in ({"_": "DeleteSigningIdentity", "name": used["name"]},
                   {"_": "DeleteSigningIdentity", "name": private["name"]},
                   {"_": "UpdateSigningIdentity", "name": used["name"], "label": "Mine now"}):
        await guest.refused(action, 404)
    assert await owner.identities() == [private, used]


async def test_two_concurrent_creates_with_one_request_id_make_one_identity(publishing, hm, http):
    d = desk(http, publishing, "concurrent")
    action = {"_": "CreateSigningIdentity", "label": "Once", "clientRequestId": "same"}
    first, second = await asyncio.gather(d.act(action), d.act(action))
    assert first[0] == second[0] == 200 and first[1] == second[1]
    assert [i["id"] for i in await d.identities()] == [first[1]["identity"]["id"]]
    message = await d.refused({**action, "label": "Other"}, 409)
    assert "was already used with a different request" in message


# -- the health answer ------------------------------------------------------------------------


async def test_the_health_answer_states_every_capability_truthfully(publishing, local, hm_port, http):
    for proc, hm_url in ((publishing, f"http://127.0.0.1:{hm_port}"), (local, None)):
        for path in ("/api/health", "/agents/api/health"):
            r = await http.get(f"http://127.0.0.1:{proc.port}{path}")
            body = r.json()
            assert r.status_code == 200 and body["ok"] is True and body["status"] == "ok"
            capabilities = {k: v for k, v in body.items()
                            if k not in ("status", "ok", "uptime", "version", "schemaVersion", "storage", "serverKey")}
            expected = {
                # No --searxng-url or crawler here: the desktop must not offer web search.
                "webTools": {"search": False, "readBrowser": False},
                "subscriptionAuth": False,
                # (these servers run with --code-exec off: tests/procs.py; a running sandbox is
                # tests/server/sandbox/test_code_exec.py's)
                "codeExec": False,
                "codeExecReason": "Code execution is disabled by configuration (--code-exec off)",
                "codeExecReasonCode": "config-disabled",
                "codeExecRuntimes": [],
                "codeExecBackend": "none",
                "codeExecRuntimeNotes": {},
                # Seed search needs the HM server; memory search is always there.
                "searches": {"seed": bool(hm_url), "memory": True, "web": False},
            }
            if hm_url:
                # (the fake HM server of these tests comes and goes: whichever it was at the last ask)
                hm_state = body["hmServer"]
                expected.update(hmServerUrl=hm_url, ipfsServerUrl=hm_url, hmServer=hm_state)
                assert hm_state["reachable"] in (True, False, None)
                assert ("error" in hm_state) == (hm_state["reachable"] is False)
            else:
                expected.update(hmServer={"offline": True})
            assert capabilities == expected


async def test_an_account_made_before_there_was_an_hm_server_goes_up_whole_at_its_first_update(tmp_path, http):
    from seed_agents.server.main import start_server

    from tests.conftest import make_config

    offline = await start_server(make_config(tmp_path))
    try:
        d = Desk(http, f"http://127.0.0.1:{offline.port}", keypair("offline-first"))
        made = (await d.ok({"_": "CreateSigningIdentity", "label": "Early"}))["identity"]
        imported = (await d.ok({"_": "ImportSigningIdentity", "seed": b"\x09" * 32, "label": "Theirs"}))["identity"]
    finally:
        await offline.stop()
    async with FakeHmServer() as hm:
        online = await start_server(make_config(tmp_path, hm_server_url=hm.base_url))
        try:
            d.base = f"http://127.0.0.1:{online.port}"
            renamed = (await d.ok({"_": "UpdateSigningIdentity", "name": made["name"], "label": "Later"}))["identity"]
            assert renamed["serverUrl"] == hm.base_url
            assert [b.type for b in hm.published[-1]] == ["Profile", "Change", "Change", "Ref"]
            assert hm.profile(made["accountId"])["name"] == "Later"
            await d.ok({"_": "UpdateSigningIdentity", "name": made["name"], "label": "Later still"})
            assert [b.type for b in hm.published[-1]] == ["Profile"]
            # An imported account only ever gets a profile: its home document is its owner's.
            await d.ok({"_": "UpdateSigningIdentity", "name": imported["name"], "label": "Theirs too"})
            assert [b.type for b in hm.published[-1]] == ["Profile"] and len(hm.published) == 3
        finally:
            await online.stop()

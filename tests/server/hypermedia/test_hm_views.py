"""`read hm://…` and its views (`:directory`, `:attributes`, `:profile`, `:comments`, `:versions`)
and comments published then read back, through server/tools/hm_tools.py and the HM client against
the fake HM server; a hostile server gives one bounded error and nothing half published."""

from __future__ import annotations

import pytest

from seed_agents.protocol.hm import hm_blobs
from seed_agents.server.hypermedia.client import HmClient, HmError
from seed_agents.server.tools import hm_tools
from seed_agents.server.tools.authority import Authority
from seed_agents.server.tools.context import ToolContext, ToolFailure

from tests.fakes.hm_server import REFUSAL_SECRET, FakeHmServer

SEED = bytes(range(32))
ACCOUNT = hm_blobs.account_id(SEED)
OTHER_SEED = bytes(range(1, 33))
OTHER = hm_blobs.account_id(OTHER_SEED)
TS = 1_767_225_600_000


@pytest.fixture
async def hm():
    async with FakeHmServer() as fake:
        yield fake


@pytest.fixture
async def client(hm):
    async with HmClient(hm.base_url, timeout=2) as c:
        yield c


def ctx_for(client) -> ToolContext:
    agent = {"id": "a", "account": "z6MkReader", "definition": {}}
    return ToolContext(None, None, lambda: TS, "z6MkReader", agent, "s", "r", hm=client,
                       authority=Authority.of_agent(agent, "model"))


async def read(client, address: str) -> dict:
    return (await hm_tools.read(ctx_for(client), address)).output


async def site(client) -> None:
    await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "Research agent", TS))
    await client.publish_document(SEED, "---\nname: Notes\nsummary: What we saw\n---\nfirst", f"hm://{ACCOUNT}/notes", TS)
    await client.publish_document(SEED, "# Kites\n\nred", f"hm://{ACCOUNT}/notes/kites", TS + 1)
    await client.publish_document(SEED, "# Owls\n\nbrown", f"hm://{ACCOUNT}/owls", TS + 2)


async def test_directory_lists_the_child_documents(hm, client):
    await site(client)
    top = await read(client, f"hm://{ACCOUNT}/:directory")
    assert top["type"] == "hypermedia_directory" and top["view"] == "directory"
    assert [(d["path"], d.get("name"), d.get("childrenCount")) for d in top["documents"]] == [
        ("/notes", "Notes", 1), ("/owls", "Owls", 0)]
    assert top["documents"][0]["summary"] == "What we saw"
    assert f"- [Notes](hm://{ACCOUNT}/notes) (1 children) — What we saw" in top["markdown"]
    assert top["note"] == hm_tools.DATA_NOTE
    # The request as the Seed client makes it: Query with the includes as JSON.
    assert hm.requests[-1][1].startswith("/api/Query?includes=%5B%7B%22space%22%3A%22" + ACCOUNT)
    nested = await read(client, f"hm://{ACCOUNT}/notes/:directory")
    assert [d["path"] for d in nested["documents"]] == ["/notes/kites"]
    empty = await read(client, f"hm://{ACCOUNT}/owls/:directory")
    assert empty["documents"] == [] and "(no child documents)" in empty["markdown"]


async def test_attributes_are_the_metadata_alone(hm, client):
    await site(client)
    out = await read(client, f"hm://{ACCOUNT}/notes/:attributes")
    assert out["view"] == "attributes" and out["metadata"] == {"name": "Notes", "summary": "What we saw"}
    assert out["title"] == "Notes" and "markdown" not in out and out["version"]


async def test_a_document_read_carries_its_version_and_metadata(hm, client):
    await site(client)
    out = await read(client, f"hm://{ACCOUNT}/owls")
    assert out["type"] == "hypermedia_document" and out["title"] == "Owls" and out["version"]
    assert "brown" in out["markdown"] and out["note"] == hm_tools.DATA_NOTE


async def test_the_profile_of_an_account(hm, client):
    await site(client)
    out = await read(client, f"hm://{ACCOUNT}/:profile")
    assert out["type"] == "hypermedia_profile" and out["accountUid"] == ACCOUNT
    assert out["title"] == "Research agent" and out["markdown"].startswith("# Research agent\n")
    assert out["contacts"] == [] and "Contacts/related contact keys: 0" in out["markdown"]
    unknown = await read(client, f"hm://{OTHER}/:profile")
    assert unknown["title"] == OTHER and "knows no such account" in unknown["markdown"]


async def test_versions_list_every_change(hm, client):
    await site(client)
    url = f"hm://{ACCOUNT}/owls"
    second = await client.publish_document(SEED, "# Owls\n\nbrown and white", url, TS + 3)
    out = await read(client, f"{url}/:versions")
    ids = [v["id"] for v in out["versions"]]
    assert out["latestVersion"] == second and second in ids and len(ids) == 3   # genesis, first, second
    old = await read(client, f"{url}?v={ids[1]}")
    assert "brown and white" not in old["markdown"] and "brown" in old["markdown"]


async def test_a_comment_and_a_threaded_reply_round_trip(hm, client):
    await site(client)
    await client.publish_blobs(hm_blobs.new_account_blobs(OTHER_SEED, "Reader", TS))
    doc = f"hm://{ACCOUNT}/owls"
    first = await client.prepare_comment(OTHER_SEED, "Lovely **owls**.", doc, TS + 10)
    await client.publish_comment_blob(first["blob"])
    reply = await client.prepare_comment(SEED, "Thank you!", doc, TS + 20, reply_to=first["commentId"])
    await client.publish_comment_blob(reply["blob"])
    nested = await client.prepare_comment(OTHER_SEED, "You're welcome.", doc, TS + 30,
                                          reply_to=f"hm://{reply['commentId']}")
    await client.publish_comment_blob(nested["blob"])
    assert reply["replyCommentId"] == first["commentId"]
    # The library publishes a comment as {data} alone; the fake stored what was sent.
    listing = await read(client, f"{doc}/:comments")
    comments = listing["comments"]
    assert [c["id"] for c in comments] == [first["commentId"], reply["commentId"], nested["commentId"]]
    assert comments[1]["replyParent"] == first["commentId"] and comments[1]["threadRoot"] == first["commentId"]
    assert comments[2]["replyParent"] == reply["commentId"] and comments[2]["threadRoot"] == first["commentId"]
    assert "Lovely **owls**." in comments[0]["markdown"] and comments[0]["author"] == OTHER
    one = await read(client, f"{doc}/:comments/{reply['commentId']}")
    assert one["type"] == "hypermedia_comment" and "Thank you!" in one["markdown"] and one["target"] == doc


async def test_a_comment_refused_before_anything_is_published(hm, client):
    await site(client)
    doc = f"hm://{ACCOUNT}/owls"
    published = len(hm.published)
    with pytest.raises(ValueError, match="malformed hm:// links .*hm://not-an-account/x"):
        await client.prepare_comment(SEED, "see [x](hm://not-an-account/x)", doc, TS)
    with pytest.raises(ValueError, match=f"do not exist on the server: hm://{ACCOUNT}/missing"):
        await client.prepare_comment(SEED, f"see [x](hm://{ACCOUNT}/missing)", doc, TS)
    ok = await client.prepare_comment(SEED, f"see [x](hm://{ACCOUNT}/missing)", doc, TS, check_links=False)
    assert ok["blockCount"] == 1
    with pytest.raises(ValueError, match="not a document"):
        await client.prepare_comment(SEED, "hi", f"hm://{ACCOUNT}/nowhere", TS)
    with pytest.raises(ValueError, match="cannot hold a Table"):
        await client.prepare_comment(SEED, "| a | b |\n| --- | --- |\n| 1 | 2 |", doc, TS)
    with pytest.raises(HmError, match="found nothing"):
        await client.prepare_comment(SEED, "hi", doc, TS, reply_to=f"{ACCOUNT}/zNoSuchComment")
    assert len(hm.published) == published


async def test_documents_refuse_broken_links_too(hm, client):
    await site(client)
    with pytest.raises(ValueError, match="malformed hm:// links"):
        await client.publish_document(SEED, "# Bad\n\n[x](hm://nobody)", None, TS)
    with pytest.raises(ValueError, match=f"hm://{ACCOUNT}/ghost"):
        await client.publish_document(SEED, f"# Bad\n\n[x](hm://{ACCOUNT}/ghost)", None, TS)
    await client.publish_document(SEED, f"# Good\n\n[x](hm://{ACCOUNT}/owls)", None, TS)


async def test_view_refusals(hm, client):
    for address, words in ((f"hm://{ACCOUNT}/:nonsense", "unknown view :nonsense"),
                           (f"hm://{ACCOUNT}/:directory/more", ":directory ends the address"),
                           (f"hm://{ACCOUNT}/a/:profile", "hm://<account>/:profile"),
                           ("hm://nobody/x", "account id")):
        with pytest.raises(ToolFailure, match=words):
            await read(client, address)


@pytest.mark.parametrize("kind", ["refuse", "garbage", "wrong-shape", "huge", "huge-stream", "hang", "drop"])
async def test_a_hostile_server_gives_one_bounded_error(hm, kind):
    async with HmClient(hm.base_url, timeout=0.5) as client:
        await site(client)
        for view in ("/:directory", "/owls/:comments", "/owls/:versions", "/:profile"):
            hm.fail(kind)
            if view == "/:profile" and kind == "wrong-shape":
                continue   # a profile's account answer is shown as it came (its type says what it is)
            with pytest.raises(ToolFailure) as err:
                await read(client, f"hm://{ACCOUNT}{view}")
            assert hm.base_url in str(err.value) and REFUSAL_SECRET not in str(err.value)
            assert len(str(err.value)) < 300
        published = len(hm.published)
        hm.fail(kind)
        with pytest.raises(HmError):
            prepared = await client.prepare_comment(SEED, "hi", f"hm://{ACCOUNT}/owls", TS)
            await client.publish_comment_blob(prepared["blob"])
        assert len(hm.published) == published


async def test_a_wrong_cid_from_the_server_is_an_error(hm, client, monkeypatch):
    await site(client)
    prepared = await client.prepare_comment(SEED, "hi", f"hm://{ACCOUNT}/owls", TS)

    async def lying(*args, **kwargs):
        return {"cids": ["bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"]}

    monkeypatch.setattr(client, "_call", lying)
    with pytest.raises(HmError, match="CID that is not the comment's"):
        await client.publish_comment_blob(prepared["blob"])


async def test_delete_redirect_fork_and_move_round_trip(hm, client):
    await site(client)
    owls, notes = f"hm://{ACCOUNT}/owls", f"hm://{ACCOUNT}/notes"
    # delete: a tombstone; the document reads as deleted and leaves the directory
    ident, cids = await client.delete_document(SEED, owls, TS + 10)
    assert ident == owls and len(cids) == 1 and hm.get(cids[0]).value["heads"] == []
    with pytest.raises(ToolFailure, match="was deleted"):
        await read(client, owls)
    assert [d["path"] for d in (await read(client, f"hm://{ACCOUNT}/:directory"))["documents"]] == ["/notes"]
    # fork: the same version at a new address of the account
    forked = await client.fork_document(SEED, notes, f"hm://{ACCOUNT}/copy", TS + 11)
    assert (await read(client, f"hm://{ACCOUNT}/copy"))["version"] == forked["version"]
    again = await client.fork_document(SEED, notes, f"hm://{ACCOUNT}/copy", TS + 12)
    assert again["status"] == "already_exists" and again["cids"] == []
    # redirect: reading the old address reads the target
    await client.redirect_document(SEED, f"hm://{ACCOUNT}/copy", notes, TS + 13)
    assert (await read(client, f"hm://{ACCOUNT}/copy"))["title"] == "Notes"
    # refusals name what is wrong, and publish nothing
    published = len(hm.published)
    with pytest.raises(ValueError, match="not a document"):
        await client.delete_document(SEED, f"hm://{ACCOUNT}/nothing", TS)
    with pytest.raises(ValueError, match="its own account"):
        await client.delete_document(OTHER_SEED, notes, TS)
    with pytest.raises(ValueError, match="itself"):
        await client.redirect_document(SEED, notes, notes, TS)
    with pytest.raises(ValueError, match="already exists"):
        await client.fork_document(SEED, f"hm://{ACCOUNT}/notes/kites", notes, TS)
    assert len(hm.published) == published


async def test_search_asks_the_hm_server_and_answers_the_reference_s_shape(hm, client):
    await site(client)
    out = (await hm_tools.search(ctx_for(client), {"query": "kites"})).output
    assert out["results"] == [{"title": "Kites", "url": f"hm://{ACCOUNT}/notes/kites", "type": "document",
                               "parentNames": [], "versionTime": out["results"][0]["versionTime"]}]
    assert out["summary"] == 'Found 1 result for "kites".' and out["searchType"] == "hybrid"
    assert f"1. [Kites](hm://{ACCOUNT}/notes/kites)" in out["markdown"] and out["includeBody"] is False
    # The request as the Seed client makes it (URLSearchParams, the search type as its number).
    target = hm.requests[-1][1]
    assert target.startswith("/api/Search?query=kites&includeBody=false&contextSize=48&perspectiveAccountUid=")
    assert target.endswith("&searchType=2&pageSize=20")
    body = (await hm_tools.search(ctx_for(client), {"query": "brown", "includeBody": True, "pageSize": 500,
                                                    "searchType": "keyword"})).output
    assert [r["url"] for r in body["results"]] == [f"hm://{ACCOUNT}/owls"] and "pageSize=50" in hm.requests[-1][1]
    none = (await hm_tools.search(ctx_for(client), {"query": "zebra"})).output
    assert none["results"] == [] and none["summary"] == 'No results found for "zebra".'
    for kind in ("garbage", "wrong-shape", "hang"):
        hm.fail(kind)
        with pytest.raises(ToolFailure, match="Search"):
            await hm_tools.search(ctx_for(client), {"query": "kites"})


@pytest.mark.parametrize("size", [0, 5, 262_144, 700_001])
async def test_an_ipfs_file_is_read_back_verified_by_its_cid(hm, client, size):
    data = bytes((i * 7 + (i >> 8)) & 0xFF for i in range(size))
    cid = await client.publish_file(data)
    assert await client.read_ipfs(cid) == data
    assert hm.requests[-1] == ("GET", f"/ipfs/{cid}")


async def test_ipfs_reads_refuse_what_is_not_the_cid_s(hm, client, monkeypatch):
    cid = await client.publish_file(b"the real bytes")
    with pytest.raises(HmError, match="not the file"):
        monkeypatch.setattr(hm, "file", lambda c: b"other bytes")
        await client.read_ipfs(cid)
    monkeypatch.undo()
    with pytest.raises(HmError, match="over 4 bytes"):
        await client.read_ipfs(cid, max_bytes=4)
    with pytest.raises(ValueError, match="not a CID"):
        await client.read_ipfs("not-a-cid")
    with pytest.raises(HmError, match="has no file"):
        await client.read_ipfs("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    for kind in ("hang", "slow-drip", "refuse", "drop"):
        hm.fail(kind)
        async with HmClient(hm.base_url, timeout=0.5) as quick:
            with pytest.raises(HmError) as err:
                await quick.read_ipfs(cid)
        assert REFUSAL_SECRET not in str(err.value)


async def test_slow_drip_answers_end_at_the_deadline(hm):
    async with HmClient(hm.base_url, timeout=0.5) as quick:
        await site(quick)
        hm.fail("slow-drip")
        with pytest.raises(ToolFailure, match="did not answer within 0.5 s"):
            await read(quick, f"hm://{ACCOUNT}/:directory")

"""Reading and publishing documents through server/hypermedia/client.py against the fake HM server,
which builds documents from the very blobs published (or written by the vectors script)."""

from __future__ import annotations

import re

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm import hm_blobs, hm_markdown
from seed_agents.server.hypermedia.client import HmClient, HmError, HmNotFound

from tests.fakes.hm_server import REFUSAL_SECRET, FakeHmServer
from tests.hm_vectors import blob_bytes, block_ids, load

SEED = bytes(range(32))
ACCOUNT = hm_blobs.account_id(SEED)
TS = 1_767_225_600_000
DOCUMENT = load("documents")["document"]

DOC = """---
name: Trip report
---
# Trip report

We went to the **coast** and read [the guide](https://example.com/guide).

## Packing

- boots
- map
  1. paper
  2. phone

## Script

```sh
echo "ready"
```

![The bay](https://example.com/bay.jpg)
"""


@pytest.fixture
async def hm():
    async with FakeHmServer() as fake:
        yield fake


@pytest.fixture
async def client(hm):
    async with HmClient(hm.base_url, timeout=2) as c:
        yield c


def _expected(markdown: str, seed: int, metadata: dict | None = None) -> str:
    """What reading back a published `markdown` shows (`metadata`: the document's earlier one)."""
    tree, front = hm_markdown.parse_markdown(markdown, block_ids(seed))
    return hm_markdown.blocks_to_markdown({**(metadata or {}), **front}, hm_markdown.to_hm_nodes(tree))


def _ops(blob: hm_blobs.Blob) -> list[dict]:
    return dagcbor.decode(blob.data)["body"]["ops"]


async def test_reading_the_vectors_document_gives_the_library_rendering(hm, client):
    create = DOCUMENT["create"]
    hm.store([(e["cid"], blob_bytes(e)) for e in create["blobs"]])
    markdown = await client.read_document(f"hm://{DOCUMENT['accountId']}{create['path']}")
    assert markdown == create["rendered"]
    # The requests the library makes: Resource with the packed id, URLSearchParams-encoded.
    assert hm.requests[-1] == ("GET", f"/api/Resource?id=hm%3A%2F%2F{DOCUMENT['accountId']}%2Ffield-notes")


async def test_reading_after_the_vectors_update_shows_the_edit(hm, client):
    create, update = DOCUMENT["create"], DOCUMENT["updates"][1]
    hm.store([(e["cid"], blob_bytes(e)) for e in create["blobs"] + update["blobs"]])
    markdown = await client.read_document(f"hm://{DOCUMENT['accountId']}{create['path']}")
    assert markdown == _expected(update["markdown"], update["randomSeed"])
    assert "Edited intro with" in markdown and "third item" not in markdown


async def test_a_new_account_reads_as_its_home_document(hm, client):
    await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "Research agent", TS))
    markdown = await client.read_document(f"hm://{ACCOUNT}")
    assert markdown.startswith("---\nname: Research agent\n---\n")
    assert "This is an agentic account. <!-- id:" in markdown


async def test_publish_then_read_round_trips(hm, client):
    version = await client.publish_document(SEED, DOC, None, TS, new_id=block_ids(5))
    assert len(hm.published) == 1 and [b.type for b in hm.published[0]] == ["Change", "Change", "Ref"]
    url = f"hm://{ACCOUNT}/trip-report"
    first = await client.read_document(url)
    assert first == _expected(DOC, 5)
    visible = re.sub(r" ?<!-- [^>]* -->", "", first)
    for construct in ("# Trip report", "**coast**", "[the guide](https://example.com/guide)", "## Packing",
                      "- boots", "1. paper", "```sh", 'echo "ready"', "![The bay](https://example.com/bay.jpg)"):
        assert construct in visible

    # Reading and publishing back unchanged publishes nothing and answers the same version.
    assert await client.publish_document(SEED, first, url, TS + 1) == version
    assert len(hm.published) == 1

    # An edit of what was read replaces only the edited block, in place.
    edited = first.replace("We went to the **coast**", "We went to the **hills**")
    new_version = await client.publish_document(SEED, edited, url, TS + 2)
    assert new_version != version
    change, ref = hm.published[-1]
    ops = _ops(change)
    replaced = [op for op in ops if op["type"] == "ReplaceBlock"]
    assert len(replaced) == 1 and replaced[0]["block"]["text"].startswith("We went to the hills")
    assert not [op for op in ops if op["type"] in ("MoveBlocks", "DeleteBlocks")]
    assert dagcbor.decode(change.data)["depth"] == 2
    assert await client.read_document(url) == edited


async def test_an_update_from_plain_markdown_replaces_the_blocks(hm, client):
    url = f"hm://{ACCOUNT}/notes"
    await client.publish_document(SEED, "# Notes\n\nfirst", url, TS, new_id=block_ids(1))
    await client.publish_document(SEED, "# Notes\n\nsecond\n\nthird", url, TS + 1, new_id=block_ids(2))
    assert await client.read_document(url) == _expected("# Notes\n\nsecond\n\nthird", 2, {"name": "Notes"})
    assert _ops(hm.published[-1][0])[-1]["type"] == "DeleteBlocks"


async def test_a_new_document_takes_its_name_from_the_first_heading_or_the_path(hm, client):
    await client.publish_document(SEED, "# Hello there\n\ntext", None, TS)
    assert (await client.resource_metadata(f"hm://{ACCOUNT}/hello-there"))["metadata"] == {"name": "Hello there"}
    await client.publish_document(SEED, "just text", f"hm://{ACCOUNT}/plain", TS)
    assert (await client.resource_metadata(f"hm://{ACCOUNT}/plain"))["metadata"] == {"name": "plain"}


async def test_publishing_refusals(hm, client):
    with pytest.raises(ValueError, match="needs a name"):
        await client.publish_document(SEED, "no heading", None, TS)
    other = hm_blobs.account_id(bytes(32))
    with pytest.raises(ValueError, match="only publish in its own account"):
        await client.publish_document(SEED, "# X", f"hm://{other}/x", TS)
    with pytest.raises(ValueError, match="parent .* does not exist"):
        await client.publish_document(SEED, "# X", f"hm://{ACCOUNT}/a/b", TS)
    await client.publish_document(SEED, "# Dup", None, TS)
    with pytest.raises(ValueError, match="already exists"):
        await client.publish_document(SEED, "# Dup", None, TS + 1)
    with pytest.raises(ValueError, match="at most"):
        await client.publish_document(SEED, "# Big\n\n" + "x" * (1024 * 1024), None, TS)
    with pytest.raises(ValueError, match="lone surrogate"):
        await client.publish_document(SEED, "# Bad \ud800 text", None, TS)
    with pytest.raises(ValueError, match="too complex"):
        await client.publish_document(SEED, "# Brackets\n\n" + "[" * 50_000, None, TS)
    assert len(hm.published) == 1


async def test_reading_refusals(hm, client):
    with pytest.raises(ValueError, match="starts with hm://"):
        await client.read_document("ftp://example.com/page")
    with pytest.raises(ValueError, match="names an account id"):
        await client.read_document("hm://not-an-account/x")
    with pytest.raises(HmNotFound, match="knows no account"):
        await client.read_document(f"hm://{ACCOUNT}")
    await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "A", TS))
    with pytest.raises(HmNotFound, match="no document at"):
        await client.read_document(f"hm://{ACCOUNT}/missing")


@pytest.mark.parametrize("kind", ["refuse", "garbage", "wrong-shape", "huge", "hang", "deep"])
async def test_a_failing_server_while_reading_or_publishing(hm, kind):
    async with HmClient(hm.base_url, timeout=0.5) as client:
        await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "A", TS))
        hm.fail(kind)
        with pytest.raises(HmError) as err:
            await client.read_document(f"hm://{ACCOUNT}")
        assert hm.base_url in str(err.value) and REFUSAL_SECRET not in str(err.value)
        hm.fail(kind)
        with pytest.raises(HmError):
            await client.publish_document(SEED, "# Home\n\nnew text", f"hm://{ACCOUNT}", TS + 1)
        assert len(hm.published) == 1  # the account only: nothing half published


async def test_a_document_with_lone_surrogates_reads_as_valid_unicode(hm, client):
    await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "A", TS))
    original = hm._resource

    def with_surrogate(hm_id):
        answer = original(hm_id)
        answer["document"]["content"][0]["block"]["text"] = "bad \ud800 text"
        return answer

    hm._resource = with_surrogate
    markdown = await client.read_document(f"hm://{ACCOUNT}")
    assert "bad \ufffd text" in markdown
    markdown.encode("utf-8")


async def test_an_account_home_document_is_updated_in_place(hm, client):
    await client.publish_blobs(hm_blobs.new_account_blobs(SEED, "Research agent", TS, new_id=block_ids(3)))
    home = f"hm://{ACCOUNT}"
    before = await client.read_document(home)
    edited = before.replace("This is an agentic account.", "I read papers about **tides**.")
    version = await client.publish_document(SEED, edited, home, TS + 1)
    change, ref = hm.published[-1]
    value = dagcbor.decode(change.data)
    assert value["depth"] == 2 and [str(d) for d in value["deps"]] == [hm.published[0][2].cid]
    assert [str(h) for h in dagcbor.decode(ref.data)["heads"]] == [version]
    assert await client.read_document(home) == edited

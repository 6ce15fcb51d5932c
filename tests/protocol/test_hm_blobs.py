"""Seed hypermedia blobs equal @seed-hypermedia/client's bytes (tests/hm_vectors/accounts.json)."""

from __future__ import annotations

import pytest
from multiformats import CID
from nacl.signing import VerifyKey

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm import hm_blobs

from tests.hm_vectors import blob_bytes, block_ids, load

ACCOUNTS = load("accounts")


def _check(got: list[hm_blobs.Blob], want: list[dict]) -> None:
    assert [b.cid for b in got] == [w["cid"] for w in want]
    assert [b.data for b in got] == [blob_bytes(w) for w in want]


@pytest.mark.parametrize("vector", ACCOUNTS["creation"], ids=lambda v: v["name"])
def test_new_account_blobs_equal_the_library(vector):
    seed = bytes.fromhex(vector["seed"])
    assert hm_blobs.account_id(seed) == vector["accountId"]
    got = hm_blobs.new_account_blobs(seed, vector["name"], vector["ts"], new_id=block_ids(vector["randomSeed"]))
    _check(got, vector["blobs"])


@pytest.mark.parametrize("vector", ACCOUNTS["rename"] + ACCOUNTS["icon"], ids=lambda v: v["name"])
def test_profile_blobs_equal_the_library(vector):
    seed = bytes.fromhex(vector["seed"])
    icon = vector.get("icon", {}).get("cid")
    _check(hm_blobs.profile_blobs(seed, vector["name"], vector["ts"], icon), vector["blobs"])
    if icon:  # the bare CID and the ipfs:// URL name the same avatar
        _check(hm_blobs.profile_blobs(seed, vector["name"], vector["ts"], f"ipfs://{icon}"), vector["blobs"])


def test_new_account_blobs_are_signed_linked_and_addressed():
    seed = bytes(range(32))
    profile, genesis, change, ref = hm_blobs.new_account_blobs(seed, "Agent", 1_700_000_000_000)
    for blob in (profile, genesis, change, ref):
        value = dagcbor.decode(blob.data)
        assert hm_blobs.blob_cid(blob.data) == blob.cid
        sig = value["sig"]
        value["sig"] = bytes(64)
        VerifyKey(value["signer"][2:]).verify(dagcbor.encode(value), sig)
    change_value = dagcbor.decode(change.data)
    assert change_value["genesis"] == CID.decode(genesis.cid)
    assert change_value["deps"] == [CID.decode(genesis.cid)]
    ops = change_value["body"]["ops"]
    assert ops[0] == {"type": "SetAttributes", "attrs": [{"key": ["name"], "value": "Agent"}]}
    assert ops[1]["block"]["text"] == hm_blobs.HOME_TEXT
    ref_value = dagcbor.decode(ref.data)
    assert ref_value["heads"] == [CID.decode(change.cid)] and ref_value["generation"] == 1_700_000_000_000
    assert "path" not in ref_value and "space" not in ref_value
    # The genesis of a home document depends on the key alone.
    assert hm_blobs.genesis_blob(seed) == genesis


def test_account_id_refuses_a_seed_of_the_wrong_length():
    with pytest.raises(ValueError):
        hm_blobs.account_id(bytes(31))


DOCUMENT = load("documents")["document"]


def test_a_first_document_version_equals_the_library():
    create = DOCUMENT["create"]
    seed = bytes.fromhex(DOCUMENT["seed"])
    version, blobs = hm_blobs.document_blobs(seed, create["markdown"], create["ts"], path=create["path"],
                                             new_id=block_ids(create["randomSeed"]))
    assert version == create["version"]
    _check(blobs, create["blobs"])


@pytest.mark.parametrize("index", [0, 1], ids=["plain markdown", "edited read-back with ids"])
def test_an_update_in_place_equals_the_library(index):
    create, update = DOCUMENT["create"], DOCUMENT["updates"][index]
    seed = bytes.fromhex(DOCUMENT["seed"])
    base = hm_blobs.DocumentBase(genesis=create["blobs"][0]["cid"], heads=(create["version"],), depth=1,
                                 content=create["content"])
    version, blobs = hm_blobs.document_blobs(seed, update["markdown"], update["ts"], path=create["path"],
                                             base=base, new_id=block_ids(update["randomSeed"]))
    assert version == update["version"]
    _check(blobs, update["blobs"])


METADATA_UPDATES = DOCUMENT["metadataUpdates"]


@pytest.mark.parametrize("case", METADATA_UPDATES, ids=["metadata only", "name only", "metadata over a new body"])
def test_document_metadata_equals_the_library(case):
    """options.metadata and options.name as writeDocumentUpdate merges them: with no content a
    metadata-only change (the body untouched), else over the body's front matter, name last."""
    create = DOCUMENT["create"]
    seed = bytes.fromhex(DOCUMENT["seed"])
    base = hm_blobs.DocumentBase(genesis=create["blobs"][0]["cid"], heads=(create["version"],), depth=1,
                                 content=create["content"])
    overrides = {**case["metadata"], **({"name": case["name"]} if "name" in case else {})}
    version, blobs = hm_blobs.document_blobs(seed, case.get("markdown"), case["ts"], path=create["path"],
                                             base=base, overrides=overrides, new_id=block_ids(case["randomSeed"]))
    assert version == case["version"]
    _check(blobs, case["blobs"])


def test_a_metadata_only_change_that_changes_nothing_is_refused():
    create = DOCUMENT["create"]
    base = hm_blobs.DocumentBase(genesis=create["blobs"][0]["cid"], heads=(create["version"],), depth=1,
                                 content=create["content"], metadata={"name": "Field notes"})
    with pytest.raises(hm_blobs.NoChanges):
        hm_blobs.document_blobs(bytes.fromhex(DOCUMENT["seed"]), None, 1, base=base, overrides={"name": "Field notes"})


def test_an_update_that_changes_nothing_is_refused():
    create = DOCUMENT["create"]
    seed = bytes.fromhex(DOCUMENT["seed"])
    base = hm_blobs.DocumentBase(genesis=create["blobs"][0]["cid"], heads=(create["version"],), depth=1,
                                 content=create["content"])
    body = create["rendered"].split("---\n", 2)[2]  # no front matter: no metadata to set either
    with pytest.raises(hm_blobs.NoChanges):
        hm_blobs.document_blobs(seed, body, create["ts"] + 1, path=create["path"], base=base)


def test_a_published_draft_equals_the_library():
    """draft.create keeps the Markdown's blocks; draft.publish of a new document is
    writeDocumentCreate on those blocks (the server's hmBlockNodesToOperations)."""
    from seed_agents.protocol.hm import hm_markdown

    draft = load("drafts")["draft"]
    seed = bytes.fromhex(draft["seed"])
    tree, front = hm_markdown.parse_markdown(draft["markdown"], block_ids(draft["randomSeed"]))
    blocks = hm_markdown.to_hm_nodes(tree)
    assert blocks == draft["blocks"]
    metadata = {**front, "name": draft["name"]}
    assert metadata == draft["metadata"]
    version, blobs = hm_blobs.draft_document_blobs(seed, blocks, metadata, draft["ts"], path=draft["path"])
    assert version == draft["version"]
    _check(blobs, draft["blobs"])

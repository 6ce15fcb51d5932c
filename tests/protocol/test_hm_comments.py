"""Comments byte for byte as @seed-hypermedia/client builds them (tests/hm_vectors/comments.json,
written by make_vectors.mjs): the blob, its CID, and its record id."""

from __future__ import annotations

import base64

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.hm.hm_comments import (
    UnsupportedBlock,
    comment_blob,
    comment_blocks,
    comment_delete_blob,
    comment_record_id,
    comment_update_blob,
    comment_url,
)

from tests.hm_vectors import block_ids, load

VECTORS = load("comments")["comments"]
CASES = VECTORS["comments"]


@pytest.mark.parametrize("case", CASES, ids=[f"comment{i}" for i in range(len(CASES))])
def test_a_comment_is_the_library_s_bytes(case):
    seed = bytes.fromhex(VECTORS["seed"])
    target = VECTORS["target"]
    blocks = comment_blocks(case["markdown"], block_ids(case["randomSeed"]))
    blob = comment_blob(seed, blocks, target["account"], target["path"], target["version"], case["ts"],
                        reply_parent=case.get("replyParent"), thread_root=case.get("threadRoot"),
                        visibility=case.get("visibility", ""))
    expected = base64.b64decode(case["data"])
    assert blob.data == expected, (dagcbor.decode(blob.data), dagcbor.decode(expected))
    assert blob.cid == case["cid"]
    assert comment_record_id(blob.data) == case["recordId"]
    assert case["recordId"].startswith(VECTORS["accountId"] + "/")
    # The library publishes the comment blob without its CID ({data} alone).
    assert case["publishKeys"] == ["data"]


EDITS = VECTORS["edits"]


@pytest.mark.parametrize("edit", EDITS, ids=[("update" if "markdown" in e else "delete") + f"{i}"
                                             for i, e in enumerate(EDITS)])
def test_a_comment_update_or_delete_is_the_library_s_bytes(edit):
    """updateComment / deleteComment on the comment as the server answers it."""
    seed = bytes.fromhex(VECTORS["seed"])
    target = VECTORS["target"]
    original = CASES[edit["of"]]
    where = (target["account"], target["path"], target["version"])
    if "markdown" in edit:
        blocks = comment_blocks(edit["markdown"], block_ids(edit["randomSeed"]))
        blob = comment_update_blob(seed, edit["commentId"], blocks, *where, edit["ts"],
                                   reply_parent=original.get("replyParent"), thread_root=original.get("threadRoot"),
                                   visibility=original.get("visibility", ""))
    else:
        blob = comment_delete_blob(seed, edit["commentId"], *where, edit["ts"], visibility=original.get("visibility", ""))
    expected = base64.b64decode(edit["data"])
    assert blob.data == expected, (dagcbor.decode(blob.data), dagcbor.decode(expected))
    assert blob.cid == edit["cid"] and edit["publishKeys"] == ["data"]
    assert dagcbor.decode(blob.data)["id"] == edit["commentId"].split("/")[1]


def test_a_reply_names_its_parent_and_its_thread_root():
    second, third = CASES[1], CASES[2]
    assert second["replyParent"] == CASES[0]["cid"] and second["threadRoot"] == CASES[0]["cid"]
    assert third["replyParent"] == second["cid"] and third["threadRoot"] == CASES[0]["cid"]


def test_what_a_comment_cannot_hold_is_refused_by_name():
    seed = bytes(32)
    target = VECTORS["target"]
    table = comment_blocks("| a | b |\n| --- | --- |\n| 1 | 2 |")
    with pytest.raises(UnsupportedBlock, match="Table"):
        comment_blob(seed, table, target["account"], target["path"], target["version"], 1)


def test_the_comment_url_keeps_the_target_query():
    assert comment_url("hm://z6Mkx/doc?v=bafy#blk", "z6Mka/z1") == "hm://z6Mkx/doc/:comments/z6Mka/z1?v=bafy"
    assert comment_url("hm://z6Mkx", "z6Mka/z1") == "hm://z6Mkx/:comments/z6Mka/z1"

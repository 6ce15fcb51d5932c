"""Files as UnixFS blocks equal @seed-hypermedia/client's fileToIpfsBlobs (accounts.json "unixfs")."""

from __future__ import annotations

import base64
import hashlib

import pytest
from multiformats import CID

from seed_agents.protocol.hm import unixfs
from seed_agents.protocol.hm.unixfs import DAG_PB, RAW, file_blobs

from tests.hm_vectors import load, pattern_bytes

ACCOUNTS = load("accounts")


@pytest.mark.parametrize("vector", ACCOUNTS["unixfs"], ids=lambda v: str(v["size"]))
def test_file_blobs_equal_the_library(vector):
    root, blobs = file_blobs(pattern_bytes(vector["size"], vector["mul"]))
    assert root == vector["cid"]
    assert len(blobs) == len(vector["blobs"])
    for got, want in zip(blobs, vector["blobs"]):
        # Same multihash and bytes; our CID keeps the block's true codec (docs/protocol.md).
        assert CID.decode(got.cid).digest == CID.decode(want["cid"]).digest
        assert hashlib.sha256(got.data).hexdigest() == want["sha256"]
        assert len(got.data) == want["size"]
        if "data" in want:
            assert got.data == base64.b64decode(want["data"])
    codecs = [CID.decode(b.cid).codec.code for b in blobs]
    if root.startswith("bafybei"):  # several chunks: raw leaves, then dag-pb nodes, the root last
        leaves = codecs.count(RAW)
        assert leaves and codecs == [RAW] * leaves + [DAG_PB] * (len(blobs) - leaves) and blobs[-1].cid == root
    else:
        assert codecs == [RAW] and blobs[0].cid == root


def test_icon_vector_root_is_the_avatar_cid():
    icon = ACCOUNTS["icon"][0]
    root, blobs = file_blobs(base64.b64decode(icon["icon"]["data"]))
    assert root == icon["icon"]["cid"]
    assert [b.data for b in blobs] == [base64.b64decode(b["data"]) for b in icon["icon"]["blobs"]]


def test_more_chunks_than_links_make_a_balanced_tree(monkeypatch):
    # Past 174 chunks (43.5 MiB) nodes nest; shown small with 4-byte chunks and 2 links a node.
    monkeypatch.setattr(unixfs, "CHUNK_SIZE", 4)
    monkeypatch.setattr(unixfs, "MAX_LINKS", 2)
    data = b"aaaabbbbccccdddde"
    root, blobs = file_blobs(data)
    codecs = [CID.decode(b.cid).codec.code for b in blobs]
    assert codecs == [RAW] * 5 + [DAG_PB] * 6  # 5 leaves; 3 nodes over them, 2 over those, the root
    assert blobs[-1].cid == root

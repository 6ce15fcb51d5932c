"""Refs that delete, redirect and fork a document, byte for byte as @seed-hypermedia/client builds
them (tests/hm_vectors/refs.json, written by make_vectors.mjs)."""

from __future__ import annotations

import base64

from seed_agents.protocol.hm import hm_blobs

from tests.hm_vectors import load

REFS = load("refs")["refs"]
SEED = bytes.fromhex(REFS["seed"])
PATH = "/field-notes"


def check(blob: hm_blobs.Blob, vector: dict) -> None:
    assert blob.data == base64.b64decode(vector["data"])
    assert blob.cid == vector["cid"]


def test_a_tombstone_is_the_library_s():
    v = REFS["tombstone"]
    check(hm_blobs.tombstone_ref_blob(SEED, REFS["accountId"], PATH, REFS["genesis"], REFS["generation"], v["ts"]), v)


def test_redirects_in_the_account_and_away_are_the_library_s():
    v = REFS["redirect"]
    check(hm_blobs.redirect_ref_blob(SEED, REFS["accountId"], PATH, REFS["genesis"], REFS["generation"], v["ts"],
                                     target_space=REFS["accountId"], target_path="/moved-notes"), v)
    v = REFS["redirectAway"]
    check(hm_blobs.redirect_ref_blob(SEED, REFS["accountId"], PATH, REFS["genesis"], REFS["generation"], v["ts"],
                                     target_space=REFS["other"], target_path="", republish=True), v)


def test_a_fork_is_a_version_ref_at_the_destination():
    v = REFS["fork"]
    check(hm_blobs.ref_blob(SEED, REFS["accountId"], "/moved-notes", REFS["genesis"], [REFS["version"]],
                            REFS["generation"], v["ts"]), v)

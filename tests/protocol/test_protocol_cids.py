"""protocol/wire/cids.py's own base32 and sha256 give the standard library's bytes (pure: no server)."""
from __future__ import annotations

import base64
import hashlib
import random

from seed_agents.protocol.wire.cids import base32, cid_bytes, cid_text, sha256


def test_base32_and_sha256_match_the_standard_library():
    rng = random.Random(40)
    for length in range(80):
        for _ in range(5):
            data = rng.randbytes(length)
            assert base32(data) == base64.b32encode(data).decode("ascii").lower().rstrip("=")
            assert sha256(data) == hashlib.sha256(data).digest()


def test_a_cid_text_is_the_known_one():
    # The empty DAG-CBOR map's CID, as multiformats and @ipld/dag-cbor write it.
    assert cid_text(cid_bytes(b"\xa0")) == "bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua"

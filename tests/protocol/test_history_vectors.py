"""The chain rules of protocol/api/history.py against the reference IPLD libraries: the blocks,
links and signed head of tests/history_vectors/chain.json were computed by
tests/history_vectors/make_chain.mjs with @ipld/dag-cbor, multiformats and Node's Ed25519, and
our code must give the same bytes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.api import history
from seed_agents.protocol.wire.keys import Keypair

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "history_vectors" / "chain.json").read_text())
SESSION = VECTORS["sessionId"]


def test_each_block_and_link_matches_the_reference_libraries():
    prev = None
    for entry in VECTORS["events"]:
        body = bytes.fromhex(entry["body"])
        event = dagcbor.decode(body)
        assert dagcbor.encode(event) == body   # our encoder makes the stored event's bytes too
        block = history.block(SESSION, entry["seq"], prev, body, event["createdAt"])
        assert block.hex() == entry["block"], f"block {entry['seq']}"
        link = history.link(SESSION, entry["seq"], prev, body, event["createdAt"])
        assert history.cid_text(link) == entry["link"]
        prev = link


def test_the_signed_head_matches_node_ed25519():
    head = VECTORS["head"]
    key = Keypair.from_seed(bytes.fromhex(VECTORS["serverSeed"]))
    link = history.cid_from_text(head["head"])
    assert history.head_payload(SESSION, head["seq"], link, head["ts"]).hex() == head["payload"]
    signed = history.sign_head(key, SESSION, head["seq"], link, head["ts"])
    assert signed["sig"].hex() == head["sig"]
    checked = history.read_head(signed)
    history.verify_head(checked, key.public_key)


def test_a_follower_checks_the_chain_against_the_head():
    key = Keypair.from_seed(bytes.fromhex(VECTORS["serverSeed"]))
    bodies = [bytes.fromhex(e["body"]) for e in VECTORS["events"]]
    head = VECTORS["head"]
    signed = history.read_head({"sessionId": SESSION, "seq": head["seq"], "head": head["head"], "ts": head["ts"],
                                "sig": bytes.fromhex(head["sig"])})
    check = history.ChainCheck(SESSION)
    check.extend(bodies)
    check.check_head(signed, key.public_key)
    # Another key did not sign it.
    with pytest.raises(history.HistoryError, match="not signed by the server key"):
        check.check_head(signed, Keypair.from_seed(bytes(32)).public_key)
    # A gap is named where it is.
    gap = history.ChainCheck(SESSION)
    gap.add(bodies[0])
    with pytest.raises(history.HistoryError) as caught:
        gap.add(bodies[2])
    assert caught.value.seq == 2
    # An edited event no longer hashes to the head.
    edited = history.ChainCheck(SESSION)
    event = dagcbor.decode(bodies[1])
    event["event"]["name"] = "write"
    edited.extend([bodies[0], dagcbor.encode(event), *bodies[2:]])
    with pytest.raises(history.HistoryError, match="does not hash to the signed head"):
        edited.check_head(signed, key.public_key)
    assert history.first_bad_seq(SESSION, [bodies[0], dagcbor.encode(event), *bodies[2:]],
                                 [history.cid_from_text(e["link"]) for e in VECTORS["events"]]) == 2


def test_the_fast_reading_of_stored_events_agrees_with_decoding_them():
    """ChainCheck reads seq and createdAt straight from a stored event's layout; for every size
    of id and seq the server writes, the links equal those computed from the decoded event, and a
    body laid out otherwise is decoded instead."""
    import uuid

    session = str(uuid.UUID(int=7))
    prev = None
    check = history.ChainCheck(session, 0)
    seqs = [1, 2, 23, 24, 255, 256, 65535, 65536, 70000]
    for seq in seqs:
        check.seq = seq - 1
        check.link = prev
        body = dagcbor.encode({"id": str(uuid.uuid4()), "sessionId": session, "seq": seq,
                               "event": {"type": "message", "content": "x" * (seq % 50)}, "createdAt": 1_764_900_000_000 + seq})
        sid, s, created = history.event_fields(body)
        assert history.ChainCheck(session, seq - 1, prev).add(body) == history.link(sid, s, prev, body, created)
        prev = history.link(sid, s, prev, body, created)
    odd = dagcbor.encode({"id": "a", "sessionId": session, "seq": 1, "event": {}, "createdAt": 5})   # a small createdAt
    assert history.ChainCheck(session).add(odd) == history.link(session, 1, None, odd, 5)

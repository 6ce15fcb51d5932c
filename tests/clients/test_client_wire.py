"""clients/wire.read_frame: an append frame decoded with each event's bytes, proved canonical
by rebuilding the frame; anything else is left to the strict decoder (None)."""
from __future__ import annotations

import pytest

from seed_agents.clients.history import Follower
from seed_agents.clients.wire import decode_frame, read_frame
from seed_agents.protocol.api import history
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.errors import DagCborError
from seed_agents.protocol.wire.framing_v2 import append_batch_cbor, append_cbor, response_frame

SESSION = "s-1"


def _event(seq: int) -> bytes:
    return dagcbor.encode({"id": f"e{seq}", "sessionId": SESSION, "seq": seq, "createdAt": 1_700_000_000_000 + seq,
                           "event": {"type": "message", "role": "user", "content": f"hello {seq}", "n": -seq,
                                     "meta": {"ratio": 0.5, "ok": True, "none": None, "raw": b"\x00\x01"}}})


def test_a_replay_batch_keeps_each_events_stored_bytes():
    bodies = [_event(seq) for seq in range(1, 6)]
    data = append_batch_cbor(f"sessions/{SESSION}", bodies)
    frame, kept = read_frame(data)
    assert frame == decode_frame(data)
    assert kept == bodies


def test_a_live_append_keeps_its_events_bytes():
    body = _event(7)
    data = append_cbor(f"sessions/{SESSION}", body)
    frame, kept = read_frame(data)
    assert frame == decode_frame(data) and kept == [body]


def test_other_frames_are_decoded_once_without_bodies():
    for data in (response_frame(1, {"ok": True}), dagcbor.encode({"_": "replayed", "key": "sessions/s", "seq": 3})):
        assert read_frame(data) == (decode_frame(data), None)


def test_non_canonical_frames_go_to_the_strict_decoder():
    with pytest.raises(DagCborError):
        read_frame(b"\xff\x00garbage")
    # A batch whose event holds an integer in a longer head than needed: cbor2 reads it, but the
    # rebuilt frame differs, so these bytes are not taken as what the server hashed; the strict
    # decoder refuses them, as it refused them before.
    body = _event(1)
    seq_one = dagcbor.encode("seq") + b"\x01"
    assert seq_one in body
    longer = body.replace(seq_one, dagcbor.encode("seq") + b"\x18\x01")
    with pytest.raises(DagCborError):
        read_frame(append_batch_cbor("sessions/s", [longer]))
    # Unsorted keys: the strict decoder accepts them (its documented leniency), with no bodies.
    unsorted = b"\xa2" + dagcbor.encode("seq") + b"\x03" + dagcbor.encode("_") + dagcbor.encode("replayed")
    assert read_frame(unsorted) == (decode_frame(unsorted), None)


def test_a_follower_given_the_kept_bytes_checks_the_same_chain():
    bodies = [_event(seq) for seq in range(1, 4)]
    frame, kept = read_frame(append_batch_cbor(f"sessions/{SESSION}", bodies))
    with_bytes, encoded_again, raw = Follower(SESSION, None), Follower(SESSION, None), history.ChainCheck(SESSION)
    for event, body in zip(frame["events"], kept):
        with_bytes.add(event, body)
        encoded_again.add(event)
        raw.add(body)
    assert with_bytes.check.link == encoded_again.check.link == raw.link

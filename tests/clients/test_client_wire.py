"""clients/wire.read_frame: an append frame decoded with each event's bytes, proved canonical
by a strict decoder (framing_v2.split_append); anything else is left to the general decoder,
which accepts it without bytes kept (None) or refuses it."""
from __future__ import annotations

import pytest

from seed_agents.clients.errors import HistoryError
from seed_agents.clients.history import Follower
from seed_agents.clients.wire import decode_frame, read_frame
from seed_agents.protocol.api import history
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.errors import DagCborError
from seed_agents.protocol.wire.framing_v2 import append_batch_cbor, append_cbor, response_frame, split_append

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


# -- the strict reader (framing_v2.split_append, cbrrr): each form DAG-CBOR forbids, inside an
# event of a replay batch and of a live append, is refused as the client refused it before:
# read_frame raises the strict decoder's DagCborError (the transport drops the frame, and a
# pinned-key follower then finds the gap), and nothing of it is kept as the server's bytes.

_K = dagcbor.encode
_BODY = _event(1)
_RATIO = _K("ratio") + b"\xfb\x3f\xe0" + bytes(6)   # 0.5 as a 64-bit float


def _swap(old: bytes, new: bytes) -> bytes:
    assert _BODY.count(old) == 1, old
    return _BODY.replace(old, new)


FORBIDDEN_IN_AN_EVENT = {
    "an integer in a longer head": _swap(_K("seq") + b"\x01", _K("seq") + b"\x18\x01"),
    "a negative integer in a longer head": _swap(_K("n") + b"\x20", _K("n") + b"\x38\x00"),
    "a text length in a longer head": _swap(_K("role") + _K("user"), _K("role") + b"\x78\x04user"),
    "a byte string length in a longer head": _swap(b"\x42\x00\x01", b"\x58\x02\x00\x01"),
    "a map count in a longer head": b"\xb8\x05" + _BODY[1:],
    "a duplicate key": b"\xa6" + _BODY[1:] + _K("id") + _K("e1"),
    "NaN": _swap(_RATIO, _K("ratio") + b"\xfb\x7f\xf8" + bytes(6)),
    "infinity": _swap(_RATIO, _K("ratio") + b"\xfb\x7f\xf0" + bytes(6)),
    "an indefinite map": b"\xbf" + _BODY[1:] + b"\xff",
    "an indefinite text": _swap(_K("user"), b"\x7f" + _K("user") + b"\xff"),
    "undefined": _swap(_K("none") + b"\xf6", _K("none") + b"\xf7"),
    "a tag other than 42": _swap(_K("n") + b"\x20", _K("n") + b"\xc1\x20"),
    "invalid UTF-8": _swap(_K("user"), b"\x64us\xff\xfe"),
}

# Forms the contract tolerates in what a client reads (section 2: keys out of order, short
# floats): decoded, but not the canonical bytes the server hashed, so none are kept (a follower
# encodes the value again, as it did).
TOLERATED_IN_AN_EVENT = {
    "keys out of order": (b"\xa5" + _K("seq") + b"\x01" + _K("id") + _K("e1")
                          + _BODY[1 + len(_K("id") + _K("e1") + _K("seq") + b"\x01"):]),
    "a 16-bit float": _swap(_RATIO, _K("ratio") + b"\xf9\x38\x00"),
    "a 32-bit float": _swap(_RATIO, _K("ratio") + b"\xfa\x3f\x00\x00\x00"),
}


def _frames_with(body: bytes) -> list[bytes]:
    key = f"sessions/{SESSION}"
    return [append_batch_cbor(key, [_event(0), body, _event(2)]), append_cbor(key, body)]


def test_the_hand_made_bodies_differ_from_the_canonical_one_only_where_named():
    assert TOLERATED_IN_AN_EVENT["keys out of order"] != _BODY
    assert decode_frame(TOLERATED_IN_AN_EVENT["keys out of order"]) == dagcbor.decode(_BODY)


@pytest.mark.parametrize("body", list(FORBIDDEN_IN_AN_EVENT.values()), ids=list(FORBIDDEN_IN_AN_EVENT))
def test_a_frame_with_a_forbidden_form_in_an_event_is_refused(body):
    for data in _frames_with(body):
        assert split_append(data) is None
        with pytest.raises(DagCborError):
            read_frame(data)


@pytest.mark.parametrize("body", list(TOLERATED_IN_AN_EVENT.values()), ids=list(TOLERATED_IN_AN_EVENT))
def test_a_tolerated_form_is_decoded_without_keeping_bytes(body):
    for data in _frames_with(body):
        assert split_append(data) is None
        frame, kept = read_frame(data)
        assert kept is None and frame == decode_frame(data)


def test_a_frame_with_bytes_after_it_or_a_wrong_count_is_refused():
    bodies = [_event(seq) for seq in range(1, 4)]
    good = append_batch_cbor(f"sessions/{SESSION}", bodies)
    count = dagcbor.encode_head(4, 3)
    at = good.index(_K("events") + count) + len(_K("events"))
    cases = {
        "a byte after the frame": good + b"\x00",
        "a whole event after the frame": good + bodies[0],
        "a count of 4 for 3 events": good[:at] + dagcbor.encode_head(4, 4) + good[at + 1:],
        "an indefinite events array": good[:at] + b"\x9f" + good[at + 1:] + b"\xff",
    }
    for name, data in cases.items():
        assert split_append(data) is None, name
        with pytest.raises(DagCborError):
            read_frame(data)
    # A count of 2 for 3 events leaves one event's bytes after the frame: refused the same way.
    with pytest.raises(DagCborError):
        read_frame(good[:at] + dagcbor.encode_head(4, 2) + good[at + 1:])
    # The count in a longer head than needed: refused by the strict reader and by the decoder.
    longer = good[:at] + b"\x98\x03" + good[at + 1:]
    assert split_append(longer) is None
    with pytest.raises(DagCborError):
        read_frame(longer)


def test_a_replay_with_a_refused_frame_breaks_the_followers_chain():
    # The transport drops a frame read_frame refuses; the pinned-key follower then sees a gap.
    bodies = [_event(seq) for seq in range(1, 5)]
    key = f"sessions/{SESSION}"
    frames = [append_batch_cbor(key, bodies[:2]),
              append_batch_cbor(key, [bodies[2].replace(_K("seq") + b"\x03", _K("seq") + b"\x18\x03")]),
              append_batch_cbor(key, bodies[3:])]
    follower = Follower(SESSION, None)
    with pytest.raises(HistoryError) as caught:
        for data in frames:
            try:
                frame, kept = read_frame(data)
            except DagCborError:
                continue
            for event, body in zip(frame["events"], kept):
                follower.add(event, body)
    assert caught.value.seq == 3 and "expected event 3, got event 4" in str(caught.value)


def test_add_decoded_links_as_add_does_and_names_the_same_errors():
    bodies = [_event(seq) for seq in range(1, 6)]
    frame, kept = read_frame(append_batch_cbor(f"sessions/{SESSION}", bodies))
    fast, slow = history.ChainCheck(SESSION), history.ChainCheck(SESSION)
    for event, body in zip(frame["events"], kept):
        assert fast.add_decoded(body, event) == slow.add(body)
    # A gap, another session's event: the same error and seq as `add` gives.
    for event_seq, session in ((7, SESSION), (6, "s-other")):
        body = dagcbor.encode({**dagcbor.decode(_event(event_seq)), "sessionId": session})
        event = dagcbor.decode(body)
        with pytest.raises(history.HistoryError) as by_fields:
            fast.add_decoded(body, event)
        with pytest.raises(history.HistoryError) as by_bytes:
            slow.add(body)
        assert (str(by_fields.value), by_fields.value.seq) == (str(by_bytes.value), by_bytes.value.seq)
    # Fields that disagree with the bytes can only fail the chain: the link differs.
    other = dict(dagcbor.decode(_event(6)), createdAt=1)
    assert history.ChainCheck(SESSION, fast.seq, fast.link).add_decoded(_event(6), other) != \
        history.ChainCheck(SESSION, slow.seq, slow.link).add(_event(6))


def test_add_decoded_writes_each_width_of_seq_as_add_does():
    # seq in one byte, in 0x18 + 1, in 0x19 + 2 (its own fast path) and in 0x1a + 4 bytes.
    for first in (20, 250, 65_530):
        bodies = [dagcbor.encode({**dagcbor.decode(_event(seq)), "seq": seq}) for seq in range(first, first + 12)]
        start = b"\x01\x71\x12\x20" + bytes(range(32))   # any 36-byte link to continue from
        fast = history.ChainCheck(SESSION, first - 1, start)
        slow = history.ChainCheck(SESSION, first - 1, start)
        for body in bodies:
            assert fast.add_decoded(body, dagcbor.decode(body)) == slow.add(body)

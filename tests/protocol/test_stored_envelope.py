"""A user event's envelope as its row keeps it (protocol/api/stored_envelope.py): packed without
what the event holds (the one-text-part action encoded again from the event and its ts; any other
action with the event's values cut out), rebuilt byte for byte; kept whole whenever that would
not be exact."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seed_agents.protocol.api import stored_envelope
from seed_agents.protocol.api.history import cid_bytes
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import ZERO_SIG, sign_envelope, verify_envelope
from seed_agents.protocol.wire.keys import Keypair

OWNER = Keypair.from_seed(bytes([1] * 32))
DELEGATE = Keypair.from_seed(bytes([2] * 32))
SESSION = "01JD7S3M4Q0000000000000000"
TS = 1_764_900_000_000


def signed(text_parts: list[str], *, session: str = SESSION, key: Keypair = OWNER,
           account: Keypair = OWNER, **extra) -> bytes:
    action = {"_": "MessageSession", "sessionId": session,
              "content": [{"type": "text", "text": t} for t in text_parts], **extra}
    return sign_envelope(key, action, account=account.principal, ts=TS)


def event_for(raw: bytes, text: str, *, session: str = SESSION) -> dict:
    """The user event as the server stores it for that envelope (server/handlers/messages.py)."""
    env = verify_envelope(raw, now_ms=None)
    payload = {"type": "message", "role": "user", "content": text,
               "meta": {"accountId": env.account_id, "signerId": env.signer_id},
               "envelopeCid": "bafy-not-read-here"}
    if "clientMessageId" in env.action:
        payload["clientMessageId"] = env.action["clientMessageId"]
    return {"id": "e1", "sessionId": session, "seq": 3, "createdAt": TS, "event": payload}


def form(kept: bytes) -> str:
    return {1: "cut", 2: "shaped"}.get(kept[0], "whole")


def test_a_message_of_one_text_part_is_kept_as_its_ts_and_signature():
    text = "turn 7 says hello world"
    for extra in ({}, {"clientMessageId": "client-7"}):
        raw = signed([text], **extra)
        event = event_for(raw, text)
        kept = stored_envelope.pack(raw, event)
        # everything but the ts and the sig is in the event: 1 + 9 + 64 bytes
        assert form(kept) == "shaped" and len(kept) == 74, (extra, len(kept))
        assert stored_envelope.unpack(kept, event) == raw
        # given the action verification decoded (as the MessageSession handler does), the same
        assert stored_envelope.pack(raw, event, verify_envelope(raw, now_ms=None).action) == kept


def test_an_action_equal_only_to_pythons_loose_eye_is_not_taken_for_the_shaped_one():
    # A ts of 1.764e12 or True compares equal to an int under ==, but encodes differently: the
    # shaped form would then rebuild other bytes. Such a value falls back to the cut form.
    raw = signed(["hello"])
    event = event_for(raw, "hello")
    action = verify_envelope(raw, now_ms=None).action
    for ts in (float(TS), True):
        kept = stored_envelope.pack(raw, event, {**action, "ts": ts})
        assert form(kept) == "cut" and stored_envelope.unpack(kept, event) == raw
    # an action with one more field, or another text, is not the shaped one either
    for other in ({**action, "contextLines": []}, {**action, "content": [{"type": "text", "text": "hellO"}]}):
        kept = stored_envelope.pack(raw, event, other)
        assert form(kept) == "cut" and stored_envelope.unpack(kept, event) == raw


def test_any_other_action_is_kept_without_its_text_session_and_frame():
    text = "turn 7 says hello world"
    raw = signed([text], contextLines=["> quoted"])
    event = event_for(raw, text)
    kept = stored_envelope.pack(raw, event)
    assert form(kept) == "cut"
    # the text, the session id, the frame's keys and both 34-byte principals are left out
    assert len(kept) <= len(raw) - len(text) - len(SESSION) - 100, (len(kept), len(raw))
    assert stored_envelope.unpack(kept, event) == raw
    # an event that lost the client's message id (or never named it) cannot take the shaped form
    raw = signed([text], clientMessageId="client-8")
    event = event_for(raw, text)
    del event["event"]["clientMessageId"]
    kept = stored_envelope.pack(raw, event)
    assert form(kept) == "cut" and stored_envelope.unpack(kept, event) == raw


def test_a_long_text_is_not_kept_twice():
    text = "x" * 70_000   # (a 5-byte head: every width of the cut offsets' heads is read back)
    raw = signed([text])
    kept = stored_envelope.pack(raw, event_for(raw, text))
    assert len(kept) == 74
    assert stored_envelope.unpack(kept, event_for(raw, text)) == raw


def test_shapes_whose_text_is_not_one_piece_still_rebuild_exactly():
    cases = [
        (["first", "second"], "first\nsecond", "cut"),   # joined parts: only the session id is cut
        ([""], "", "shaped"),
        ([SESSION], SESSION, "shaped"),                  # the text is the session id
        (["ünïcødé ✓ 🚀"], "ünïcødé ✓ 🚀", "shaped"),
    ]
    for parts, text, expected in cases:
        raw = signed(parts)
        event = event_for(raw, text)
        kept = stored_envelope.pack(raw, event)
        assert form(kept) == expected and len(kept) < len(raw), parts
        assert stored_envelope.unpack(kept, event) == raw, parts


def test_a_delegate_signing_for_an_account_rebuilds_both_principals():
    raw = signed(["on behalf"], key=DELEGATE, account=OWNER)
    event = event_for(raw, "on behalf")
    assert event["event"]["meta"]["signerId"] != event["event"]["meta"]["accountId"]
    assert stored_envelope.unpack(stored_envelope.pack(raw, event), event) == raw


def test_what_would_not_rebuild_exactly_is_kept_whole():
    raw = signed(["hello"])
    event = event_for(raw, "hello")
    other = event_for(signed(["hello"], key=DELEGATE, account=DELEGATE), "hello")
    assert stored_envelope.pack(raw, other) == raw            # the event names other principals
    no_meta = {**event, "event": {**event["event"], "meta": "?"}}
    assert stored_envelope.pack(raw, no_meta) == raw          # nothing to rebuild the principals from
    # a sixth top-level field (a newer client's): not the five-field layout, kept as signed
    six = {"type": "AgentsAction", "signer": OWNER.principal, "sig": ZERO_SIG, "account": OWNER.principal,
           "action": {"_": "MessageSession", "sessionId": SESSION, "ts": TS,
                      "content": [{"type": "text", "text": "hello"}]}, "v": 2}
    six["sig"] = OWNER.sign(dagcbor.encode(six))
    six_raw = dagcbor.encode(six)
    assert stored_envelope.pack(six_raw, event) == six_raw
    # rows kept whole (before packing, or as above) read back as they are
    assert stored_envelope.unpack(raw, event) == raw
    assert stored_envelope.unpack(b"", event) == b""


def test_an_edited_event_rebuilds_an_envelope_that_no_longer_verifies():
    for extra in ({}, {"contextLines": ["x"]}):   # (each form)
        _edited_fails(signed(["pay 10"], **extra))


def _edited_fails(raw: bytes) -> None:
    event = event_for(raw, "pay 10")
    kept = stored_envelope.pack(raw, event)
    assert form(kept) != "whole"
    edited = {**event, "event": {**event["event"], "content": "pay 99"}}
    rebuilt = stored_envelope.unpack(kept, edited)
    assert rebuilt != raw and cid_bytes(rebuilt) != cid_bytes(raw)
    try:
        verify_envelope(rebuilt, now_ms=None)
        raise AssertionError("an edited text still verified")
    except Exception as exc:  # noqa: BLE001 - whichever refusal, it must not verify
        assert "signature" in str(exc) or getattr(exc, "status", None) == 401, exc
    # a store edited past reading (the event gone, the row cut short): the row comes back as kept
    assert stored_envelope.unpack(kept, None) == kept
    assert stored_envelope.unpack(kept[:40], event) == kept[:40]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=300), min_size=1, max_size=3),
       session=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
       client_id=st.none() | st.text(max_size=20))
def test_every_packed_envelope_rebuilds_byte_for_byte(parts, session, client_id):
    extra = {} if client_id is None else {"clientMessageId": client_id}
    raw = signed(parts, session=session, **extra)
    text = "\n".join(parts)
    event = event_for(raw, text, session=session)
    kept = stored_envelope.pack(raw, event)
    assert len(kept) <= len(raw)
    assert stored_envelope.unpack(kept, event) == raw
    # packing by value (the decoded action at hand) chooses the same form, byte for byte
    assert stored_envelope.pack(raw, event, verify_envelope(raw, now_ms=None).action) == kept

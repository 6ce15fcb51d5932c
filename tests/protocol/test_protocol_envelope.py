"""Signed envelopes against envelopes.json: signing input, signing, and steps 1-4 of verification.

Steps 5 (delegation) and 6 (replay) need server state and are not checked by verify_envelope.
So the "unauthorized-signer" case (contractStatus 403) and the "registered-signer" case both
*pass* at this layer; the server refuses the former at step 5 with "Signer is not authorized".
"""
from __future__ import annotations

import dataclasses
import time

import pytest
from multiformats import multibase
from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from seed_agents.protocol.wire.dagcbor import decode, decode_canonical, encode
from seed_agents.protocol.wire.envelope import (
    ZERO_SIG,
    VerifiedEnvelope,
    build_envelope,
    sign_envelope,
    signing_input,
    verify_envelope,
)
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.framing_types import Refusal, Request, Unsubscribe
from seed_agents.protocol.wire.framing_v2 import V2Framing
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.v2 import decode_v2_request

from tests.vectors import UNDEFINED, from_tagged, load

VECTORS = load("envelopes")
CASES = VECTORS["cases"]
IDS = [c["name"] for c in CASES]
PASSES_STEPS_1_TO_4 = {"unauthorized-signer"}  # refused at step 5, in the server


def frame_of(case) -> bytes:
    return bytes.fromhex(case["envelopeHex"])


def clock_of(case) -> int:
    return int(from_tagged(case["action"])["ts"])


def expected_status(case) -> int | None:
    """None: passes steps 1-4."""
    if case["valid"] or case.get("reason") in PASSES_STEPS_1_TO_4:
        return None
    return case["contractStatus"]


def outcome(envelope, **kwargs) -> int | VerifiedEnvelope:
    try:
        return verify_envelope(envelope, **kwargs)
    except ProtocolError as err:
        return err.status


def principal_bytes(text: str) -> bytes:
    return multibase.decode(text)  # also the deliberately invalid ec01 principals


def test_every_case_is_exercised():
    reasons = {c.get("reason") for c in CASES if not c["valid"]}
    assert reasons == {"bad-signature", "unauthorized-signer", "bad-sig-length", "bad-principal",
                       "bad-type", "undefined-value", "bad-ts", "missing-field"}
    assert len(CASES) == 26


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_signing_input(case):
    if case.get("reason") == "undefined-value":
        # The frame itself is refused (0xf7); the vector's signing input is the JS re-encoding,
        # in which undefined became null.
        tagged = from_tagged(case["action"])
        action = {k: (None if v is UNDEFINED else v) for k, v in tagged.items()}
        envelope = {"type": "AgentsAction", "signer": principal_bytes(case["signer"]),
                    "sig": bytes(64), "account": principal_bytes(case["account"]),
                    "action": action}
    else:
        envelope = decode(frame_of(case))
    assert signing_input(envelope).hex() == case["signingInputHex"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_verify_matches_the_contract_status(case):
    expected = expected_status(case)
    for now_ms in (clock_of(case), None):  # clock set to the case's ts, or the window off
        for envelope in (frame_of(case), bytearray(frame_of(case)), memoryview(frame_of(case))):
            result = outcome(envelope, now_ms=now_ms)
            if expected is None:
                assert isinstance(result, VerifiedEnvelope), result
            else:
                assert result == expected


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_decoded_map_input_gives_the_same_result(case):
    try:
        envelope = decode(frame_of(case))
    except ProtocolError:
        assert case.get("reason") == "undefined-value"
        return
    expected = expected_status(case)
    result = outcome(envelope, now_ms=clock_of(case))
    assert isinstance(result, VerifiedEnvelope) if expected is None else result == expected


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sig_valid_is_ed25519_over_the_signing_input(case):
    sig = bytes.fromhex(case["sigHex"])
    signer = principal_bytes(case["signer"])
    if len(sig) != 64 or signer[:2] != b"\xed\x01":
        assert case["sigValid"] is False  # blobs.verify refuses before checking the signature
        return
    try:
        crypto_sign_open(sig + bytes.fromhex(case["signingInputHex"]), signer[2:])
        verifies = True
    except BadSignatureError:
        verifies = False
    assert verifies is case["sigValid"]


SIGNABLE = [c for c in CASES if (c["valid"] and c.get("canonicalFrame", True))
            or c.get("reason") == "unauthorized-signer"]


@pytest.mark.parametrize("case", SIGNABLE, ids=[c["name"] for c in SIGNABLE])
def test_sign_envelope_reproduces_the_frame(case):
    signer = Keypair.from_seed(bytes.fromhex(case["signerSeedHex"]))
    account = Keypair.from_seed(bytes.fromhex(case["accountSeedHex"])).principal
    action = from_tagged(case["action"])
    assert sign_envelope(signer, action, account=account).hex() == case["envelopeHex"]
    built = build_envelope(signer, action, account=account)
    assert encode(built) == frame_of(case)
    assert built["sig"].hex() == case["sigHex"]


@pytest.mark.parametrize("case", [c for c in CASES if c["valid"]],
                         ids=[c["name"] for c in CASES if c["valid"]])
def test_verified_fields(case):
    verified = verify_envelope(frame_of(case), now_ms=clock_of(case))
    action = from_tagged(case["action"])
    assert verified.account_id == case["account"] and verified.signer_id == case["signer"]
    assert verified.account == principal_bytes(case["account"])
    assert verified.signer == principal_bytes(case["signer"])
    assert verified.action == action and verified.name == action["_"]
    assert verified.ts == action["ts"] and verified.sig.hex() == case["sigHex"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        verified.ts = 0  # type: ignore[misc]


def test_non_canonical_frame_is_verified_over_its_canonical_re_encoding():
    (case,) = [c for c in CASES if c.get("canonicalFrame") is False]
    frame = frame_of(case)
    value, canonical = decode_canonical(frame)
    assert canonical is False
    assert encode(value).hex() == case["canonicalEnvelopeHex"]
    assert signing_input(value).hex() == case["signingInputHex"]
    # The signature never covered the received bytes: verifying over them would fail.
    received = bytearray(frame)
    start = received.find(bytes.fromhex(case["sigHex"]))
    received[start:start + 64] = bytes(64)
    with pytest.raises(BadSignatureError):
        crypto_sign_open(bytes.fromhex(case["sigHex"]) + bytes(received), value["signer"][2:])
    assert verify_envelope(frame, now_ms=clock_of(case)).name == "GetSession"


# --- the clock window (step 3) ----------------------------------------------------------

KEY = Keypair.from_seed(bytes(range(32)))
T = 1_767_225_600_000
ACTION = {"_": "ListAgents"}


@pytest.mark.parametrize("skew, ok", [(0, True), (30_000, True), (-30_000, True),
                                      (30_001, False), (-30_001, False), (41_234, False)])
def test_clock_window(skew, ok):
    frame = sign_envelope(KEY, ACTION, ts=T + skew)
    for envelope in (frame, decode(frame)):
        if ok:
            assert verify_envelope(envelope, now_ms=T).ts == T + skew
        else:
            with pytest.raises(ProtocolError) as err:
                verify_envelope(envelope, now_ms=T)
            assert err.value.status == 401
            assert f"{abs(skew)} ms" in err.value.message and "clock" in err.value.message
    assert verify_envelope(frame, now_ms=None).ts == T + skew  # window off


def test_window_is_configurable():
    frame = sign_envelope(KEY, ACTION, ts=T + 5_000)
    with pytest.raises(ProtocolError):
        verify_envelope(frame, now_ms=T, window_ms=4_999)
    assert verify_envelope(frame, now_ms=T, window_ms=5_000)


@pytest.mark.parametrize("ts", [True, 1.0 * T, "1767225600000", None, [T]], ids=repr)
def test_ts_must_be_an_integer(ts):
    envelope = build_envelope(KEY, {**ACTION, "ts": 0}, ts=0)
    envelope["action"]["ts"] = ts
    if ts is None:
        del envelope["action"]["ts"]
    envelope["sig"] = KEY.sign(signing_input(envelope))  # correctly signed, so only ts is wrong
    for candidate in (encode(envelope), envelope):
        with pytest.raises(ProtocolError) as err:
            verify_envelope(candidate, now_ms=T)
        assert err.value.status == 401 and "ts" in err.value.message


# --- order of the steps and their messages ----------------------------------------------


def resign(envelope: dict, keypair: Keypair = KEY) -> dict:
    envelope["sig"] = keypair.sign(signing_input(envelope))
    return envelope


@pytest.mark.parametrize("mutate, status, fragment", [
    (lambda e: e.update(type="Other"), 400, "type"),
    (lambda e: e.pop("type"), 400, "'type' is missing"),
    (lambda e: e.pop("signer"), 400, "'signer' is missing"),
    (lambda e: e.update(signer=e["signer"][:33]), 400, "signer"),
    (lambda e: e.update(account=b"\xec\x01" + e["account"][2:]), 400, "account"),
    (lambda e: e.update(account="z6Mk"), 400, "account"),
    (lambda e: e.pop("action"), 400, "'action' is missing"),
    (lambda e: e.update(action=[1]), 400, "action"),
    (lambda e: e["action"].pop("_"), 400, "'_'"),
    (lambda e: e["action"].update(_=7), 400, "'_'"),
    (lambda e: e.update(sig=b"x" * 63), 400, "64-byte"),
    (lambda e: e.update(sig="no"), 400, "64-byte"),
    (lambda e: e["action"].update(ts=T + 60_000), 401, "ahead of server time"),
    (lambda e: e["action"].update(ts=T - 60_000), 401, "behind server time"),
])
def test_each_step_fails_with_its_status_even_when_the_signature_is_also_bad(mutate, status,
                                                                             fragment):
    envelope = build_envelope(KEY, ACTION, ts=T)
    mutate(envelope)
    if type(envelope.get("sig")) is bytes and len(envelope["sig"]) == 64:
        envelope["sig"] = bytes(64)  # a bad signature too: the earlier step must answer first
    for candidate in (encode(envelope), envelope):
        with pytest.raises(ProtocolError) as err:
            verify_envelope(candidate, now_ms=T)
        assert err.value.status == status and fragment in err.value.message, err.value.message


def test_bad_signature_message_says_what_was_signed():
    envelope = build_envelope(KEY, ACTION, ts=T)
    envelope["action"]["extra"] = 1
    with pytest.raises(ProtocolError) as err:
        verify_envelope(encode(envelope), now_ms=T)
    assert err.value.status == 401 and "canonical encoding" in err.value.message


def test_signature_by_another_key_fails():
    other = Keypair.from_seed(bytes(32))
    envelope = resign(build_envelope(KEY, ACTION, ts=T), other)
    with pytest.raises(ProtocolError) as err:
        verify_envelope(encode(envelope), now_ms=T)
    assert err.value.status == 401


def test_frame_limits():
    frame = sign_envelope(KEY, {"_": "ListAgents", "pad": "x" * 2000}, ts=T)
    with pytest.raises(ProtocolError) as err:
        verify_envelope(frame, now_ms=T, max_size=len(frame) - 1)
    assert err.value.status == 413
    assert verify_envelope(frame, now_ms=T, max_size=len(frame)).name == "ListAgents"
    deep: object = "leaf"
    for _ in range(70):
        deep = [deep]
    frame = sign_envelope(KEY, {"_": "ListAgents", "deep": deep}, ts=T)
    with pytest.raises(ProtocolError) as err:
        verify_envelope(frame, now_ms=T)
    assert err.value.status == 400 and "nested" in err.value.message
    assert verify_envelope(frame, now_ms=T, max_depth=80).name == "ListAgents"


@pytest.mark.parametrize("garbage", [b"", b"\xff", b"\xa0", b"[]", encode([1, 2]), encode("x"),
                                     encode({"type": "AgentsAction"})])
def test_garbage_frames_are_400(garbage):
    with pytest.raises(ProtocolError) as err:
        verify_envelope(garbage, now_ms=T)
    assert err.value.status == 400


def test_other_input_types_are_400():
    for bad in ("text", 5, None, [1]):
        with pytest.raises(ProtocolError) as err:
            verify_envelope(bad, now_ms=T)  # type: ignore[arg-type]
        assert err.value.status == 400


def test_unencodable_map_is_400():
    envelope = build_envelope(KEY, ACTION, ts=T)
    envelope["action"]["x"] = float("nan")
    with pytest.raises(ProtocolError) as err:
        verify_envelope(envelope, now_ms=T)
    assert err.value.status == 400


def test_extra_envelope_fields_are_signed_and_accepted():
    envelope = build_envelope(KEY, ACTION, ts=T)
    envelope["v"] = 2
    resign(envelope)
    assert verify_envelope(encode(envelope), now_ms=T).name == "ListAgents"
    envelope["v"] = 3  # not re-signed
    with pytest.raises(ProtocolError) as err:
        verify_envelope(encode(envelope), now_ms=T)
    assert err.value.status == 401


# --- building -----------------------------------------------------------------------------


def test_build_envelope_ts_rules():
    assert build_envelope(KEY, {"_": "X", "ts": 5})["action"]["ts"] == 5
    assert build_envelope(KEY, {"_": "X", "ts": 5}, ts=6)["action"]["ts"] == 6
    assert build_envelope(KEY, {"_": "X"}, now_ms=7)["action"]["ts"] == 7
    before = time.time_ns() // 1_000_000
    ts = build_envelope(KEY, {"_": "X"})["action"]["ts"]
    assert before <= ts <= time.time_ns() // 1_000_000


def test_build_envelope_drops_none_fields_like_omit_undefined():
    envelope = build_envelope(KEY, {"_": "CreateSession", "agentId": "a", "title": None}, ts=T)
    assert "title" not in envelope["action"]
    assert envelope["account"] == envelope["signer"] == KEY.principal
    assert envelope["type"] == "AgentsAction"


def test_build_envelope_leaves_the_callers_action_alone():
    action = {"_": "ListAgents"}
    build_envelope(KEY, action, ts=T)
    assert action == {"_": "ListAgents"}


def test_signing_input_zeroes_the_sig_and_ignores_key_order():
    envelope = build_envelope(KEY, ACTION, ts=T)
    shuffled = dict(reversed(list(envelope.items())))
    assert signing_input(envelope) == signing_input(shuffled)
    assert ZERO_SIG in signing_input(envelope) and envelope["sig"] not in signing_input(envelope)


# --- v2 framing -----------------------------------------------------------------------------


def test_v2_request_roundtrip_uses_the_envelope_bytes():
    framing = V2Framing(1 << 20, 64)
    for case in [c for c in CASES if c["valid"] and c.get("canonicalFrame", True)]:
        envelope = decode(frame_of(case))
        for request_id in (0, 23, 24, 70_000, 2**40):
            request = framing.read(encode({"id": request_id, "envelope": envelope}))
            assert type(request) is Request and request.id == request_id
            assert request.envelope == frame_of(case)   # sliced, not decoded
            verified = verify_envelope(request.envelope, now_ms=clock_of(case))
            assert verified.sig.hex() == case["sigHex"]


def test_v2_request_errors():
    framing = V2Framing(1 << 20, 64)
    envelope = build_envelope(KEY, ACTION, ts=T)
    for frame in (encode([1]), encode({"envelope": envelope}), encode({"id": -1}),
                  encode({"id": "7"}), b"\xff"):
        with pytest.raises(ProtocolError) as err:
            decode_v2_request(frame)
        assert err.value.status == 400
        refusal = framing.read(frame)
        assert type(refusal) is Refusal and refusal.value["status"] == 400
    control = framing.read(encode({"id": 3, "_": "Unsubscribe", "key": "sessions/x"}))
    assert type(control) is Unsubscribe and (control.id, control.key) == (3, "sessions/x")
    refusal = framing.read(encode({"id": 4, "x": 1}))
    assert type(refusal) is Refusal and refusal.id == 4 and refusal.value["status"] == 400
    bad = dict(envelope, sig=bytes(64))
    with pytest.raises(ProtocolError) as err:
        verify_envelope(framing.read(encode({"id": 1, "envelope": bad})).envelope, now_ms=T)
    assert err.value.status == 401
    extra = framing.read(encode({"id": 1, "envelope": envelope, "x": 1}))
    assert type(extra.envelope) is dict   # not the canonical {id, envelope}: decoded whole
    assert verify_envelope(extra.envelope, now_ms=T).name == "ListAgents"


def test_a_verified_envelope_keeps_the_canonical_bytes_that_were_signed():
    # A user event's stored envelope and its CID reuse these (server/handlers/messages.py).
    frame = sign_envelope(KEY, {"_": "MessageSession", "sessionId": "s", "text": "hi"}, ts=T)
    assert verify_envelope(frame, now_ms=T).raw == frame                 # the fast path
    assert verify_envelope(decode(frame), now_ms=T).raw == frame         # a decoded map (v2)
    # A field of the envelope's own (a newer client's) is signed too, so it is kept.
    extra = build_envelope(KEY, ACTION, ts=T)
    extra["via"] = "x"
    extra["sig"] = bytes(64)
    extra["sig"] = KEY.sign(encode(extra))
    for candidate in (encode(extra), extra):
        env = verify_envelope(candidate, now_ms=T)
        assert env.raw == encode(extra) and decode(env.raw)["via"] == "x"
    # Not canonical on the wire (the map's keys out of order): the canonical re-encoding is
    # what was signed, and what is kept.
    value = decode(frame)
    shuffled = b"\xa5" + b"".join(encode(k)[0:] + encode(v) for k, v in reversed(list(value.items())))
    assert shuffled != frame and decode_canonical(shuffled)[1] is False
    assert verify_envelope(shuffled, now_ms=T).raw == frame

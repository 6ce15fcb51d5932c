"""Capability blobs against capabilities.json."""
from __future__ import annotations

import pytest

from seed_agents.protocol.wire.capability import capability_cid, make_capability, parse_capability
from seed_agents.protocol.wire.dagcbor import decode, encode
from seed_agents.protocol.wire.envelope import ZERO_SIG
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.principals import principal_from_string

from tests.vectors import from_tagged, load

CASES = load("capabilities")["cases"]
IDS = [c["name"] for c in CASES]
VALID = [c for c in CASES if c["valid"]]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cid(case):
    assert capability_cid(bytes.fromhex(case["blobHex"])) == case["cidString"]


@pytest.mark.parametrize("case", VALID, ids=[c["name"] for c in VALID])
def test_make_capability_reproduces_the_blob(case):
    issuer = Keypair.from_seed(bytes.fromhex(case["issuerSeedHex"]))
    delegate = principal_from_string(case["delegate"])
    blob = make_capability(issuer, delegate, case["role"], case["ts"], case["label"])
    assert blob.hex() == case["blobHex"]
    assert decode(blob) == from_tagged(case["blob"])
    assert encode({**decode(blob), "sig": ZERO_SIG}).hex() == case["signingInputHex"]


@pytest.mark.parametrize("case", VALID, ids=[c["name"] for c in VALID])
def test_parse_capability(case):
    blob = bytes.fromhex(case["blobHex"])
    cap = parse_capability(blob)
    assert (cap.issuer_id, cap.delegate_id) == (case["issuer"], case["delegate"])
    assert cap.issuer == principal_from_string(case["issuer"])
    assert cap.delegate == principal_from_string(case["delegate"])
    assert (cap.role, cap.ts, cap.label) == (case["role"], case["ts"], case["label"])
    assert cap.cid == case["cidString"] and cap.blob == blob


def test_corrupted_signature_is_400():
    (case,) = [c for c in CASES if not c["valid"]]
    with pytest.raises(ProtocolError) as err:
        parse_capability(bytes.fromhex(case["blobHex"]))
    assert err.value.status == 400 and "signature" in err.value.message


A = Keypair.from_seed(bytes(range(32)))
B = Keypair.from_seed(bytes(range(1, 33)))


def forged(mutate) -> bytes:
    body = decode(make_capability(A, B.principal, "AGENT", 1, "l"))
    mutate(body)
    body["sig"] = A.sign(encode({**body, "sig": ZERO_SIG}))
    return encode(body)


@pytest.mark.parametrize("blob, fragment", [
    (b"\xff", "DAG-CBOR"),
    (encode([1]), "map"),
    (forged(lambda b: b.update(type="Other")), "type"),
    (forged(lambda b: b.pop("delegate")), "'delegate' is missing"),
    (forged(lambda b: b.update(delegate=b"\xec\x01" + bytes(32))), "delegate"),
    (forged(lambda b: b.update(role="ADMIN")), "role"),
    (forged(lambda b: b.update(role=["AGENT"])), "role"),
    (forged(lambda b: b.update(ts=1.5)), "ts"),
    (forged(lambda b: b.update(label=7)), "label"),
    (encode({**decode(make_capability(A, B.principal, "AGENT", 1)), "sig": b"x"}), "sig"),
    (forged(lambda b: b.update(signer=B.principal)), "signature"),  # claims B, signed by A
])
def test_faults_are_400(blob, fragment):
    with pytest.raises(ProtocolError) as err:
        parse_capability(blob)
    assert err.value.status == 400 and fragment in err.value.message, err.value.message


def test_not_bytes():
    with pytest.raises(ProtocolError):
        parse_capability("a7")  # type: ignore[arg-type]


def test_make_capability_checks_its_inputs():
    with pytest.raises(ProtocolError):
        make_capability(A, b"\xed\x01", "AGENT", 1)
    with pytest.raises(ProtocolError):
        make_capability(A, B.principal, "OWNER", 1)
    assert "label" not in decode(make_capability(A, B.principal, "WRITER", 1))

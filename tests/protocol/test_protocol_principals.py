"""Principals and keys against principals.json."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multiformats import multibase

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.principals import (
    PRINCIPAL_PREFIX,
    check_principal,
    principal_from_public_key,
    principal_from_string,
    principal_to_string,
    public_key_of,
)

from tests.vectors import load

VECTORS = load("principals")


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_cases(case):
    keypair = Keypair.from_seed(bytes.fromhex(case["seedHex"]))
    assert keypair.public_key.hex() == case["publicKeyHex"]
    assert keypair.principal.hex() == case["principalHex"]
    assert keypair.account_id == case["principalString"]
    principal = bytes.fromhex(case["principalHex"])
    assert principal_from_public_key(keypair.public_key) == principal
    assert principal_to_string(principal) == case["principalString"]
    assert principal_from_string(case["principalString"]) == principal
    assert public_key_of(principal) == keypair.public_key
    assert case["principalString"].startswith("z6Mk")


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=[c["name"] for c in VECTORS["invalid"]])
def test_invalid_strings_name_the_kind_of_error(case):
    with pytest.raises(ProtocolError) as err:
        principal_from_string(case["principalString"])
    assert err.value.status == 400
    assert case["errorKind"] in err.value.message  # encoding / length / multicodec


@pytest.mark.parametrize("value, fragment", [
    (b"\xed\x01" + bytes(31), "length"),
    (b"\xed\x01" + bytes(33), "length"),
    (b"\xec\x01" + bytes(32), "multicodec"),
    ("z6Mk", "byte string"),
    (None, "byte string"),
])
def test_check_principal(value, fragment):
    with pytest.raises(ProtocolError) as err:
        check_principal(value)
    assert err.value.status == 400 and fragment in err.value.message
    with pytest.raises(ProtocolError):
        principal_to_string(value)


def test_non_string_input():
    with pytest.raises(ProtocolError) as err:
        principal_from_string(b"z6Mk")
    assert "encoding" in err.value.message


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_base58_matches_multiformats(key):
    principal = PRINCIPAL_PREFIX + key
    text = principal_to_string(principal)
    assert text == multibase.encode(principal, "base58btc")
    assert principal_from_string(text) == principal


def test_keypair():
    a = Keypair.generate()
    b = Keypair.from_seed(a.seed)
    assert (a.public_key, a.principal, a.account_id) == (b.public_key, b.principal, b.account_id)
    assert len(a.principal) == 34 and len(a.sign(b"m")) == 64
    assert a.sign(b"m") == b.sign(b"m")  # Ed25519 is deterministic
    assert a.seed.hex() not in repr(a)
    with pytest.raises(ValueError):
        Keypair.from_seed(bytes(31))

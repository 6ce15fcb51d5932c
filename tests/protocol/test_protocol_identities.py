"""The identity actions' parsers, and the one AgentDefinition CreateAgent and UpdateAgent share:
bytes in, typed actions or a 400 naming the field out."""
from __future__ import annotations

import pytest

from seed_agents.protocol.api.actions import parse_action
from seed_agents.protocol.api.actions_identities import signing_keys_of
from seed_agents.protocol.wire.errors import ProtocolError

TS = 1_700_000_000_000
BLOCKS = [{"block": {"id": "a", "type": "Paragraph", "text": "Be kind."}}]


def parse(action: dict):
    return parse_action({**action, "ts": TS})


def refused(action: dict) -> str:
    with pytest.raises(ProtocolError) as info:
        parse(action)
    assert info.value.status == 400
    return info.value.message


def test_identity_actions_parse_and_never_show_the_seed():
    seed = bytes(range(32))
    got = parse({"_": "ImportSigningIdentity", "seed": seed, "label": "  Mine ", "clientRequestId": "r"})
    assert (got.seed, got.label, got.client_request_id) == (seed, "Mine", "r")
    assert seed.hex() not in repr(got) and str(list(seed)) not in repr(got)
    got = parse({"_": "UpdateSigningIdentity", "name": "hm-account-x", "label": "L",
                 "icon": {"data": b"\x89PNG", "mimeType": "image/png", "fileName": "a.png"}})
    assert (got.icon.data, got.icon.mime_type, got.icon.file_name) == (b"\x89PNG", "image/png", "a.png")
    assert parse({"_": "CreateSigningIdentity"}).label is None
    assert parse({"_": "ListSigningIdentities", "agentId": "a1"}).agent_id == "a1"
    assert parse({"_": "DeleteSigningIdentity", "name": "n"}).name == "n"


@pytest.mark.parametrize("action, message", [
    ({"_": "ImportSigningIdentity", "seed": b"\x00" * 16}, "ImportSigningIdentity.seed must be exactly 32 bytes, got 16"),
    ({"_": "ImportSigningIdentity"}, "ImportSigningIdentity.seed is required"),
    ({"_": "CreateSigningIdentity", "label": " "}, "CreateSigningIdentity.label must not be empty"),
    ({"_": "CreateSigningIdentity", "label": "a\nb"}, "CreateSigningIdentity.label must not contain control characters"),
    ({"_": "UpdateSigningIdentity", "name": "n"}, "UpdateSigningIdentity.label is required"),
    ({"_": "UpdateSigningIdentity", "name": "n", "label": "l", "icon": {"data": b""}},
     "UpdateSigningIdentity.icon.data must not be empty"),
    ({"_": "UpdateSigningIdentity", "name": "n", "label": "l", "icon": "x"},
     "UpdateSigningIdentity.icon must be a map, got text"),
])
def test_identity_refusals_name_the_field(action, message):
    assert refused(action) == message


def definition(**extra) -> dict:
    return {"name": "A", "systemPrompt": BLOCKS, "modelProvider": "echo", "model": "m", **extra}


def test_update_agent_takes_the_definition_create_agent_takes():
    full = definition(reasoningLevel="high", enabledModels=[{"provider": "p", "model": "m"}],
                      tools=["read"], signingKey="k1", signingKeys=["k1", "k2"], metadata={"x": 1})
    assert parse({"_": "CreateAgent", "definition": full}).system_prompt == "Be kind."
    update = parse({"_": "UpdateAgent", "agentId": "a", "definition": full})
    assert update.definition == full and update.model_provider == "echo"
    assert signing_keys_of(full) == ["k1", "k2"]


@pytest.mark.parametrize("extra, message", [
    ({"reasoningLevel": "max"}, "definition.reasoningLevel must be one of minimal, low, medium, high, xhigh, got 'max'"),
    ({"enabledModels": {"p": "m"}}, "definition.enabledModels must be an array, got a map"),
    ({"enabledModels": [{"provider": "p"}]}, "definition.enabledModels[0].model is required"),
    ({"tools": ["read", ""]}, "definition.tools[1] must not be empty"),
    ({"tools": ["t"] * 33}, "definition.tools must have at most 32 entries, got 33"),
    ({"signingKeys": "k"}, "definition.signingKeys must be an array of identity names, got text"),
    ({"signingKeys": ["k", 3]}, "definition.signingKeys[1] must be text, got an integer"),
    ({"metadata": []}, "definition.metadata must be a map, got an array"),
])
@pytest.mark.parametrize("name", ["CreateAgent", "UpdateAgent"])
def test_both_refuse_the_same_bad_fields(name, extra, message):
    assert refused({"_": name, "agentId": "a", "definition": definition(**extra)}) == f"{name}.{message}"

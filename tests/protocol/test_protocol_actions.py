"""Typed actions: every action of CONTRACT section 4, its fields, and its bounds."""
from __future__ import annotations

import pytest

from seed_agents.protocol.api import actions as A
from seed_agents.protocol.api.actions import parse_action, request_fingerprint
from seed_agents.protocol.wire.dagcbor import decode
from seed_agents.protocol.wire.errors import ProtocolError

from tests.vectors import load

TS = 1_767_225_600_000


def act(action_name: str, /, **fields) -> dict:
    return {"_": action_name, "ts": TS, **fields}


def refused(action: dict, *fragments: str) -> str:
    with pytest.raises(ProtocolError) as err:
        parse_action(action)
    assert err.value.status == 400
    for fragment in fragments:
        assert fragment in err.value.message, err.value.message
    return err.value.message


def test_every_valid_vector_action_parses():
    for case in load("envelopes")["cases"]:
        if case["valid"]:
            action = decode(bytes.fromhex(case["envelopeHex"]))["action"]
            parsed = parse_action(action)
            assert type(parsed).__name__ == action["_"] and parsed.ts == action["ts"]


@pytest.mark.parametrize("name", sorted(A.ACTIONS))
def test_every_action_name_has_a_parser(name):
    """A bare action of each known name is parsed into the action of that name (or refused for
    a field), never refused as an unknown action."""
    try:
        parsed = parse_action(act(name))
    except ProtocolError as err:
        assert err.status == 400 and "unknown action" not in err.message, err.message
    else:
        assert type(parsed).__name__ == name


@pytest.mark.parametrize("action, message", [
    ({"_": "Nope", "ts": TS}, "unknown action 'Nope'"),
    ({"ts": TS}, "'_'"),
    ({"_": 5, "ts": TS}, "'_'"),
    ({"_": "ListAgents"}, "ListAgents.ts"),
    ({"_": "ListAgents", "ts": True}, "ListAgents.ts"),
    ([1], "map"),
])
def test_envelope_level_faults(action, message):
    refused(action, message)


def test_register_signer():
    assert parse_action(act("RegisterSigner", capability=b"blob")).capability == b"blob"
    refused(act("RegisterSigner"), "RegisterSigner.capability", "required")
    refused(act("RegisterSigner", capability="blob"), "RegisterSigner.capability", "bytes")
    refused(act("RegisterSigner", capability=bytes(A.MAX_CAPABILITY + 1)), "at most")


def test_set_secret():
    parsed = parse_action(act("SetSecret", name="k", value=b"v", metadata={"a": 1}))
    assert (parsed.name, parsed.value, parsed.metadata) == ("k", b"v", {"a": 1})
    assert parse_action(act("SetSecret", name="k", value=b"")).metadata is None
    refused(act("SetSecret", value=b"v"), "SetSecret.name", "required")
    refused(act("SetSecret", name=" ", value=b"v"), "SetSecret.name", "empty")
    refused(act("SetSecret", name="x" * 201, value=b"v"), "SetSecret.name", "200")
    refused(act("SetSecret", name="k", value="v"), "SetSecret.value", "byte string")
    refused(act("SetSecret", name="k", value=bytes(64 * 1024 + 1)), "SetSecret.value", "65536")
    assert parse_action(act("SetSecret", name="k", value=bytes(64 * 1024)))
    refused(act("SetSecret", name="k", value=b"v", metadata=[1]), "SetSecret.metadata", "map")


@pytest.mark.parametrize("kind", sorted(A.PROVIDER_TYPES - {"custom"}))
def test_provider_types(kind):
    parsed = parse_action(act("SetModelProvider", name="p", provider={"type": kind}))
    assert parsed.config.type == kind and parsed.provider == {"type": kind}


def test_set_model_provider_fields():
    provider = {"type": "custom", "baseUrl": "https://llm.example/v1",
                "secretRefs": {"apiKey": "my-key"}, "modelDefaults": {"temperature": 0.2},
                "extra": True}
    parsed = parse_action(act("SetModelProvider", name="p", provider=provider))
    assert parsed.provider is provider  # stored as signed
    assert parsed.config == A.ProviderConfig("custom", "https://llm.example/v1", "my-key",
                                             {"temperature": 0.2})
    ok = {"type": "ollama", "baseUrl": "http://127.0.0.1:11434/v1"}
    assert parse_action(act("SetModelProvider", name="p", provider=ok)).config.base_url
    for native in ("anthropic", "google"):
        native_config = {"type": native, "secretRefs": {"apiKey": "k"}}
        assert parse_action(act("SetModelProvider", name="p", provider=native_config)).config.type == native


def test_list_provider_models():
    parsed = parse_action(act("ListProviderModels", provider="main", agentId="a1"))
    assert parsed == A.ListProviderModels(TS, "main", "a1")
    assert parse_action(act("ListProviderModels", provider="echo")).agent_id is None
    with pytest.raises(ProtocolError, match="ListProviderModels.provider is required"):
        parse_action(act("ListProviderModels"))


@pytest.mark.parametrize("provider, fragments", [
    ({"type": "bard"}, ("provider.type", "one of")),
    ({}, ("provider.type", "required")),
    ({"type": "custom"}, ("provider.baseUrl", "required")),
    ({"type": "openai", "baseUrl": "ftp://x"}, ("provider.baseUrl", "http")),
    ({"type": "openai", "baseUrl": "https://"}, ("provider.baseUrl",)),
    ({"type": "openai", "baseUrl": 7}, ("provider.baseUrl", "text")),
    ({"type": "openai", "secretRefs": "k"}, ("provider.secretRefs", "map")),
    ({"type": "openai", "secretRefs": {"apiKey": 1}}, ("secretRefs.apiKey",)),
    ({"type": "openai", "modelDefaults": 1}, ("provider.modelDefaults", "map")),
    ("openai", ("SetModelProvider.provider", "map")),
])
def test_set_model_provider_faults(provider, fragments):
    refused(act("SetModelProvider", name="p", provider=provider), *fragments)


def definition(**overrides) -> dict:
    return {"name": "Echo", "systemPrompt": "", "modelProvider": "echo", "model": "m", **overrides}


def test_create_agent():
    d = definition(metadata={"nested": [1, {"x": None}]})
    parsed = parse_action(act("CreateAgent", definition=d, clientRequestId="r1"))
    assert parsed.definition is d  # kept whole, extra keys included
    assert (parsed.name, parsed.system_prompt, parsed.model_provider, parsed.model,
            parsed.client_request_id) == ("Echo", "", "echo", "m", "r1")
    assert parse_action(act("CreateAgent", definition=d)).client_request_id is None
    assert parse_action(act("CreateAgent", definition=definition(systemPrompt="x" * 100_000)))


@pytest.mark.parametrize("d, fragments", [
    (definition(name=""), ("definition.name", "empty")),
    (definition(name="n" * 201), ("definition.name",)),
    (definition(systemPrompt="x" * 100_001), ("definition.systemPrompt", "100000")),
    (definition(systemPrompt=None), ("definition.systemPrompt", "required")),
    (definition(modelProvider=3), ("definition.modelProvider", "text")),
    (definition(model=""), ("definition.model",)),
    ("x", ("CreateAgent.definition", "map")),
])
def test_create_agent_faults(d, fragments):
    refused(act("CreateAgent", definition=d), *fragments)
    refused(act("CreateAgent", definition=definition(), clientRequestId="r" * 201),
            "clientRequestId")


BLOCKS = [{"block": {"id": "h", "type": "Heading", "text": "Role"},
           "children": [{"block": {"id": "p", "type": "Paragraph", "text": "Be brief."}}]}]


def test_create_agent_takes_a_block_system_prompt_as_markdown():
    d = definition(systemPrompt=BLOCKS)
    parsed = parse_action(act("CreateAgent", definition=d))
    assert parsed.system_prompt == "# Role\n\nBe brief." and parsed.definition["systemPrompt"] is BLOCKS
    big = [{"block": {"id": "p", "type": "Paragraph", "text": "x" * 100_000}}]
    assert parse_action(act("CreateAgent", definition=definition(systemPrompt=big))).system_prompt == "x" * 100_000
    big.append({"block": {"id": "q", "type": "Paragraph", "text": "y"}})   # + "\n\ny": over
    refused(act("CreateAgent", definition=definition(systemPrompt=big)),
            "CreateAgent.definition.systemPrompt", "100000 characters of Markdown")


@pytest.mark.parametrize("prompt, fragments", [
    (7, ("CreateAgent.definition.systemPrompt", "text or an array of blocks", "integer")),
    ({"block": {}}, ("CreateAgent.definition.systemPrompt", "map")),
    ([{"block": {"id": "a"}}], ("CreateAgent.definition.systemPrompt[0].block.type",)),
    ([{"block": {"id": "a", "type": "Paragraph"}, "children": [5]}],
     ("CreateAgent.definition.systemPrompt[0].children[0]", "map")),
])
def test_malformed_block_system_prompt_is_400_naming_the_place(prompt, fragments):
    refused(act("CreateAgent", definition=definition(systemPrompt=prompt)), *fragments)


def test_text_parts_keep_their_blocks():
    parsed = parse_action(act("MessageSession", sessionId="s", content=[
        text("Role\nBe brief.", blocks=BLOCKS), text("plain")]))
    assert parsed.content[0].blocks == tuple(BLOCKS) and parsed.content[1].blocks is None
    assert parsed.text == "Role\nBe brief.\nplain"
    refused(act("MessageSession", sessionId="s", content=[text("x", blocks=[{"block": 1}])]),
            "MessageSession.content[0].blocks[0].block", "map")
    refused(act("MessageSession", sessionId="s", content=[text("x", blocks="b")]),
            "MessageSession.content[0].blocks", "array")


def test_list_model_providers_takes_an_optional_agent():
    assert parse_action(act("ListModelProviders")).agent_id is None
    assert parse_action(act("ListModelProviders", agentId="a")).agent_id == "a"
    refused(act("ListModelProviders", agentId=5), "ListModelProviders.agentId", "text")


def test_ids_and_sessions():
    assert parse_action(act("GetAgent", agentId="a")).agent_id == "a"
    refused(act("GetAgent"), "GetAgent.agentId", "required")
    refused(act("GetAgent", agentId="a" * 201), "GetAgent.agentId")
    parsed = parse_action(act("CreateSession", agentId="a", title="T", clientRequestId="c"))
    assert (parsed.agent_id, parsed.title, parsed.client_request_id) == ("a", "T", "c")
    assert parse_action(act("CreateSession", agentId="a")).title is None
    refused(act("CreateSession", agentId="a", title="t" * 1001), "CreateSession.title", "1000")
    assert parse_action(act("StopSession", sessionId="s")).session_id == "s"
    refused(act("StopSession", sessionId=5), "StopSession.sessionId")


def test_list_and_get_session():
    assert parse_action(act("ListSessions")) == A.ListSessions(TS)
    cursor = {"updatedBefore": 5, "idBefore": "c"}
    parsed = parse_action(act("ListSessions", agentId="a", limit=10_000, cursor=cursor))
    assert (parsed.agent_id, parsed.limit, parsed.cursor) == ("a", 10_000, cursor)
    for bad in (0, 10_001, -1, True, 1.0, "5"):
        refused(act("ListSessions", limit=bad), "ListSessions.limit")
    parsed = parse_action(act("GetSession", sessionId="s", afterSeq=0, limit=1))
    assert (parsed.session_id, parsed.after_seq, parsed.limit) == ("s", 0, 1)
    assert parse_action(act("GetSession", sessionId="s")).after_seq is None
    for bad in (-1, True, 2.0):
        refused(act("GetSession", sessionId="s", afterSeq=bad), "GetSession.afterSeq")


def text(t: str, **extra) -> dict:
    return {"type": "text", "text": t, **extra}


def context(*lines: str) -> dict:
    return {"type": "context", "lines": list(lines)}


def test_message_session():
    content = [text("hello", clientMessageId="m1"), context("a", "b"), text(""), context("c"),
               text("world")]
    parsed = parse_action(act("MessageSession", sessionId="s", content=content,
                              clientMessageId="m1"))
    assert parsed.text == "hello\n\nworld"
    assert parsed.context_lines == ("a", "b", "c")
    assert parsed.content[0] == A.TextPart("hello", "m1")
    assert parsed.content[1] == A.ContextPart(("a", "b"))
    assert parsed.client_message_id == "m1" and parsed.session_id == "s"


@pytest.mark.parametrize("content, fragments", [
    ([], ("MessageSession.content", "between 1 and 256")),
    ([text("x")] * 257, ("between 1 and 256",)),
    ("hello", ("MessageSession.content", "array")),
    ([context("only")], ("at least one text part",)),
    ([text("  \n")], ("at least one text part",)),
    ([text("x"), 5], ("content[1]", "map")),
    ([{"type": "image"}], ("content[0].type", "'text', 'context' or 'attachment'")),
    ([{"text": "x"}], ("content[0].type",)),
    ([text(None)], ("content[0].text", "required")),
    ([text(5)], ("content[0].text", "text")),
    ([text("x", clientMessageId=3)], ("content[0].clientMessageId",)),
    ([text("x"), {"type": "context"}], ("content[1].lines", "required")),
    ([text("x"), {"type": "context", "lines": "a"}], ("content[1].lines", "array")),
    ([text("x"), context("ok", 7)], ("content[1].lines[1]", "text")),
    ([text("x"), context("y" * 10_001)], ("content[1].lines[0]", "10000")),
    ([text("x"), context(*["l"] * 5_000), context(*["l"] * 5_001)], ("10000 context lines",)),
    ([text("x" * 200_001)], ("content[0].text", "200000")),
    ([text("x" * 100_000), text("y" * 100_000)], ("200000",)),  # joined with "\n": one over
])
def test_message_session_faults(content, fragments):
    refused(act("MessageSession", sessionId="s", content=content), *fragments)


def test_message_session_bounds_are_inclusive():
    content = [text("x" * 199_999), context(*["l"] * 10_000)]
    assert parse_action(act("MessageSession", sessionId="s", content=content))
    refused(act("MessageSession", content=[text("x")]), "MessageSession.sessionId", "required")


@pytest.mark.parametrize("key, kind, target", [
    ("account/z6MkjN1RbAxSoiyLcjNeAzwgqHNLkHWhm6fj9mu2gHFzmqSD", "account",
     "z6MkjN1RbAxSoiyLcjNeAzwgqHNLkHWhm6fj9mu2gHFzmqSD"),
    ("agents/a1", "agents", "a1"),
    ("sessions/8e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "sessions",
     "8e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"),
    ("runs/r", "runs", "r"),
])
def test_subscribe(key, kind, target):
    parsed = parse_action(act("Subscribe", key=key, afterSeq=3))
    assert (parsed.key, parsed.kind, parsed.target, parsed.after_seq) == (key, kind, target, 3)
    assert parse_action(act("Subscribe", key=key)).after_seq is None


@pytest.mark.parametrize("key", ["sessions/", "session/x", "sessions/a/b", "sessions/a b",
                                 "x", "", "runs/" + "r" * 201, 7])
def test_subscribe_bad_keys(key):
    refused(act("Subscribe", key=key), "Subscribe.key")


def test_subscribe_after_seq():
    refused(act("Subscribe", key="runs/r", afterSeq=-1), "Subscribe.afterSeq")
    refused(act("Subscribe", key="runs/r", afterSeq="1"), "Subscribe.afterSeq")


def test_unknown_fields_are_ignored_and_null_means_absent():
    assert parse_action(act("ListAgents", future=1)) == A.ListAgents(TS)
    assert parse_action(act("CreateSession", agentId="a", title=None)).title is None


def test_request_fingerprint_ignores_ts_only():
    one = act("CreateSession", agentId="a", clientRequestId="c")
    two = {**one, "ts": TS + 1}
    assert request_fingerprint(one) == request_fingerprint(two)
    assert len(request_fingerprint(one)) == 32
    assert request_fingerprint(one) != request_fingerprint({**one, "title": "t"})
    assert request_fingerprint(one) == request_fingerprint(dict(reversed(list(one.items()))))


ACCOUNT = "z6MktHobXTyFWLMftzkEnYPafSk4SAQwGB9WyWiVqSBsH7Vy"


def test_sharing_actions():
    inv = parse_action(act("InviteAgentCollaborator", agentId="a", accountId=ACCOUNT, role="writer"))
    assert (inv.agent_id, inv.account_id, inv.role) == ("a", ACCOUNT, "writer")
    refused(act("InviteAgentCollaborator", agentId="a", accountId=ACCOUNT, role="owner"),
            "InviteAgentCollaborator.role", "'reader' or 'writer'")
    refused(act("InviteAgentCollaborator", agentId="a", accountId="bob", role="reader"),
            "InviteAgentCollaborator.accountId", "account id")
    refused(act("RemoveAgentCollaborator", agentId="a", accountId="z6Mk"), "RemoveAgentCollaborator.accountId")
    assert parse_action(act("RemoveAgentCollaborator", agentId="a", accountId=ACCOUNT)).account_id == ACCOUNT
    assert parse_action(act("SetAgentPublicRead", agentId="a", publicRead=False)).public_read is False
    refused(act("SetAgentPublicRead", agentId="a", publicRead=1), "SetAgentPublicRead.publicRead", "boolean")
    refused(act("SetAgentPublicRead", agentId="a"), "SetAgentPublicRead.publicRead", "required")
    for name in ("ListAgentCollaborators", "AcceptAgentInvite", "DeclineAgentInvite"):
        assert parse_action(act(name, agentId="a")).agent_id == "a"
        refused(act(name), f"{name}.agentId")
    assert parse_action(act("ListAgentInvites")).ts == TS
    assert all(A.ACTIONS[n].read for n in ("ListAgentCollaborators", "ListAgentInvites"))
    assert not any(A.ACTIONS[n].read for n in ("InviteAgentCollaborator", "AcceptAgentInvite", "SetAgentPublicRead"))

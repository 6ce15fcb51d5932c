"""Typed actions (CONTRACT section 4): `parse_action(action_map)` -> one frozen dataclass.

A missing or wrongly typed field, an unknown action or a crossed bound is ProtocolError(400) whose
message names the field (e.g. "CreateSession.title must be text of at most 1000 characters").
Fields the contract does not name are ignored, so a newer client can add some; they are still
covered by the signature. `ts` was checked by the envelope (step 3) and is carried along.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from . import actions_files, actions_history, actions_identities, actions_oauth, actions_tools, actions_triggers
from . import actions_public_chat
from .actions_identities import check_signing_keys
from ..hm.blocks import BlockTreeError, check_tree, to_markdown
from ..wire.dagcbor import check_items, encode
from ..wire.errors import DagCborError, ProtocolError, quote
from .fields import (  # noqa: F401
    MAX_AGENTS_PAGE,
    MAX_CAPABILITY,
    MAX_CONTENT_PARTS,
    MAX_CONTEXT_LINE,
    MAX_CONTEXT_LINES,
    MAX_DEFINITION_BYTES,
    MAX_DEFINITION_ITEMS,
    MAX_ID,
    MAX_LIMIT,
    MAX_MESSAGE_TEXT,
    MAX_NAME,
    MAX_SAFE_INTEGER,
    MAX_SECRET_VALUE,
    MAX_SYSTEM_PROMPT,
    MAX_TITLE,
    MAX_URL,
    MIN_LIMIT,
    PROVIDER_TYPES,
    ActionKind,
    check_integer,
)
from .fields import Fields as _Fields
from .fields import check_text as _check_text
from .fields import id_action as _id_action
from .fields import kind_of as _kind
from .fields import no_fields as _no_fields
from .fields import read as _read
from .fields import write as _write
from ..wire.file_rules import MAX_MESSAGE_ATTACHMENTS
from ..wire.principals import principal_from_string
from ..agent.thoroughness import LEVELS as THOROUGHNESS
from ..agent.reasoning import REASONING_LEVELS

_ATTACHMENT_ID = re.compile(r"[0-9a-f]{64}")
_SUBSCRIPTION_KEY = re.compile(r"(account|agents|sessions|runs)/([^/\s]+)")


# --- actions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterSigner:
    ts: int
    capability: bytes  # the signed blob; check it with seed_agents.protocol.wire.capability.parse_capability


@dataclass(frozen=True)
class UnregisterSigner:
    ts: int
    signer_id: str  # the delegate's principal string (RegisterSignerResponse.signerId)


@dataclass(frozen=True)
class SetSecret:
    ts: int
    name: str
    value: bytes
    metadata: dict | None = None


@dataclass(frozen=True)
class ProviderConfig:
    """The checked, typed view of a provider map."""

    type: str
    base_url: str | None
    api_key_secret: str | None  # secretRefs.apiKey: the name of a secret, never the key itself
    model_defaults: dict | None


@dataclass(frozen=True)
class SetModelProvider:
    ts: int
    name: str
    provider: dict  # the provider map as signed (what is stored)
    config: ProviderConfig  # the same, checked and typed


@dataclass(frozen=True)
class ListProviderModels:
    ts: int
    provider: str  # a provider name of the account (or of agentId's owner); 'echo' is built in
    agent_id: str | None = None


@dataclass(frozen=True)
class ListModelProviders:
    ts: int
    agent_id: str | None = None  # list the providers of this agent's owner


@dataclass(frozen=True)
class CreateAgent:
    ts: int
    definition: dict  # kept whole, extra keys (metadata, ...) included
    name: str
    system_prompt: str  # as Markdown (a block tree is converted; the definition keeps the tree)
    model_provider: str
    model: str
    client_request_id: str | None = None


@dataclass(frozen=True)
class GetAgent:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class ListAgents:
    ts: int
    limit: int | None = None  # additions of ours, ignored by Seed clients: see docs/protocol.md
    cursor: dict | None = None  # {updatedBefore, idAfter}, as a previous nextCursor gave it


@dataclass(frozen=True)
class CreateSession:
    ts: int
    agent_id: str
    title: str | None = None
    client_request_id: str | None = None


@dataclass(frozen=True)
class ListSessions:
    ts: int
    agent_id: str | None = None
    limit: int | None = None
    cursor: dict | None = None  # {updatedBefore, idBefore}, as a previous nextCursor gave it
    parent_session_id: str | None = None
    include_children: bool = True


@dataclass(frozen=True)
class GetSession:
    ts: int
    session_id: str
    after_seq: int | None = None  # None: from the start (0)
    limit: int | None = None


@dataclass(frozen=True)
class TextPart:
    text: str
    client_message_id: str | None = None
    blocks: tuple | None = None  # the desktop's block tree of this text, kept for display only


@dataclass(frozen=True)
class ContextPart:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class AttachmentPart:
    id: str  # an attachment of the session (UploadSessionAttachment's id: sha256 hex)


@dataclass(frozen=True)
class MessageSession:
    ts: int
    session_id: str
    content: tuple[TextPart | ContextPart | AttachmentPart, ...]
    text: str  # the text parts joined with "\n": the user event's content
    context_lines: tuple[str, ...]  # every context line in order: for the model only
    client_message_id: str | None = None
    attachment_ids: tuple[str, ...] = ()  # the attachment parts' ids, in order, each once


@dataclass(frozen=True)
class StopSession:
    ts: int
    session_id: str


@dataclass(frozen=True)
class Subscribe:
    ts: int
    key: str
    kind: str  # account | agents | sessions | runs
    target: str  # the id after the slash
    after_seq: int | None = None


@dataclass(frozen=True)
class UpdateAgent:
    ts: int
    agent_id: str
    definition: dict  # kept whole, checked like CreateAgent's
    model_provider: str


@dataclass(frozen=True)
class DeleteAgent:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class UpdateSession:
    ts: int
    session_id: str
    title: str | None = None
    set_model_override: bool = False  # True when the action carries modelOverride (even null)
    model_override: dict | None = None  # {provider, model, reasoningLevel?}; None clears
    set_thoroughness: bool = False    # True when the action carries thoroughness (even null)
    thoroughness: str | None = None   # quick | normal | deep (protocol/agent/thoroughness.py); None clears


@dataclass(frozen=True)
class DeleteSession:
    ts: int
    session_id: str


@dataclass(frozen=True)
class RetrySession:
    ts: int
    session_id: str


@dataclass(frozen=True)
class GetRun:
    ts: int
    run_id: str


@dataclass(frozen=True)
class ListRuns:
    ts: int
    selector: str  # rootRunId | sessionId | agentId: exactly one was given
    target: str  # its value
    status: str | None = None
    limit: int | None = None


@dataclass(frozen=True)
class CancelRun:
    ts: int
    run_id: str


@dataclass(frozen=True)
class DeleteModelProvider:
    ts: int
    name: str


@dataclass(frozen=True)
class InviteAgentCollaborator:
    ts: int
    agent_id: str
    account_id: str   # a valid principal string (z6Mk...)
    role: str         # reader | writer


@dataclass(frozen=True)
class ListAgentCollaborators:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class RemoveAgentCollaborator:
    ts: int
    agent_id: str
    account_id: str


@dataclass(frozen=True)
class ListAgentInvites:
    ts: int


@dataclass(frozen=True)
class AcceptAgentInvite:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class DeclineAgentInvite:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class SetAgentPublicRead:
    ts: int
    agent_id: str
    public_read: bool


Action = (RegisterSigner | SetSecret | SetModelProvider | ListModelProviders | ListProviderModels
          | CreateAgent
          | GetAgent | ListAgents | CreateSession | ListSessions | GetSession | MessageSession
          | StopSession | Subscribe | UpdateAgent | DeleteAgent | UpdateSession | DeleteSession
          | RetrySession | GetRun | ListRuns | CancelRun | DeleteModelProvider
          | InviteAgentCollaborator | ListAgentCollaborators | RemoveAgentCollaborator
          | ListAgentInvites | AcceptAgentInvite | DeclineAgentInvite | SetAgentPublicRead
          | UnregisterSigner)


# --- parsers ------------------------------------------------------------------------------


def _register_signer(f: _Fields, ts: int) -> RegisterSigner:
    blob = f.get("capability", True)
    if type(blob) is not bytes:
        raise f.fail("capability", f"must be the bytes of a signed Capability blob, got "
                                   f"{_kind(blob)}")
    if len(blob) > MAX_CAPABILITY:
        raise f.fail("capability", f"must be at most {MAX_CAPABILITY} bytes, got {len(blob)}")
    return RegisterSigner(ts, blob)


def _unregister_signer(f: _Fields, ts: int) -> UnregisterSigner:
    value = f.text("signerId", MAX_ID)
    try:
        principal_from_string(value)
    except ProtocolError as exc:
        raise f.fail("signerId", f"must be a signer's principal (z6Mk...): {exc.message}") from None
    return UnregisterSigner(ts, value)


def _set_secret(f: _Fields, ts: int) -> SetSecret:
    name = f.text("name", MAX_NAME)
    value = f.get("value", True)
    if type(value) is not bytes:
        raise f.fail("value", f"must be a byte string, got {_kind(value)}")
    if len(value) > MAX_SECRET_VALUE:
        raise f.fail("value", f"must be at most {MAX_SECRET_VALUE} bytes, got {len(value)}")
    return SetSecret(ts, name, value, f.mapping("metadata", required=False))


def _provider(f: _Fields) -> ProviderConfig:
    raw = f.mapping("provider")
    p = _Fields(raw, f"{f.name}.provider")
    kind = p.text("type", MAX_NAME)
    if kind not in PROVIDER_TYPES:
        raise p.fail("type", f"must be one of {', '.join(sorted(PROVIDER_TYPES))}, got {quote(kind)}")
    base_url = p.text("baseUrl", MAX_URL, required=kind == "custom")
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise p.fail("baseUrl", f"must be an http:// or https:// URL, got {quote(base_url)}")
        if parts.query or parts.fragment or "?" in base_url or "#" in base_url:
            # Paths are appended to it: a query would swallow them (.../users?page=/models).
            raise p.fail("baseUrl", "may not have a query (?) or a fragment (#)")
    refs = p.mapping("secretRefs", required=False)
    api_key = None
    if refs is not None:
        api_key = _Fields(refs, f"{p.name}.secretRefs").text("apiKey", MAX_NAME, required=False)
        _Fields(refs, f"{p.name}.secretRefs").text("oauth", MAX_NAME, required=False)
    mode = p.text("authMode", MAX_NAME, required=False)
    if mode is not None and mode not in ("api-key", "subscription"):
        raise p.fail("authMode", f"must be 'api-key' or 'subscription', got {quote(mode)}")
    defaults = p.mapping("modelDefaults", required=False)
    p.text("defaultModel", MAX_NAME, required=False)   # checked; kept in the stored map, listed
    return ProviderConfig(kind, base_url, api_key, defaults)


def _set_model_provider(f: _Fields, ts: int) -> SetModelProvider:
    name = f.text("name", MAX_NAME)
    config = _provider(f)
    return SetModelProvider(ts, name, f.action["provider"], config)


def _list_provider_models(f: _Fields, ts: int) -> ListProviderModels:
    return ListProviderModels(ts, f.text("provider", MAX_NAME),
                              f.text("agentId", MAX_ID, required=False))


def _blocks(f: _Fields, field: str, *, required: bool) -> list | None:
    """A block tree (seed_agents.protocol.hm.blocks), or a 400 naming the field and the place in the tree."""
    value = f.get(field, required)
    if value is None:
        return None
    try:
        return check_tree(value)
    except BlockTreeError as exc:
        raise f.fail(field + exc.path, exc.problem) from None


def _system_prompt(d: _Fields) -> str:
    """systemPrompt: text, or the desktop's block tree; either way bounded as Markdown."""
    value = d.get("systemPrompt", True)
    if type(value) is str:
        return d.text("systemPrompt", MAX_SYSTEM_PROMPT, allow_empty=True)
    if type(value) is not list:
        raise d.fail("systemPrompt", f"must be text or an array of blocks, got {_kind(value)}")
    markdown = to_markdown(_blocks(d, "systemPrompt", required=True))
    if len(markdown) > MAX_SYSTEM_PROMPT:
        raise d.fail("systemPrompt", f"must make at most {MAX_SYSTEM_PROMPT} characters of Markdown, "
                                     f"got {len(markdown)}")
    return markdown


def _bounded_definition(f: _Fields) -> dict:
    """`definition` as a map of at most MAX_DEFINITION_BYTES of DAG-CBOR (the value is never
    quoted back: only its size)."""
    definition = f.mapping("definition")
    encoded = encode(definition)
    if len(encoded) > MAX_DEFINITION_BYTES:
        raise f.fail("definition", f"must be at most {MAX_DEFINITION_BYTES} bytes as DAG-CBOR, got {len(encoded)}")
    try:
        check_items(encoded, MAX_DEFINITION_ITEMS)
    except DagCborError:
        raise f.fail("definition", f"must hold at most {MAX_DEFINITION_ITEMS} items (values, keys, arrays "
                                   "and maps)") from None
    return definition


def _create_agent(f: _Fields, ts: int) -> CreateAgent:
    definition, name, prompt, provider, model = _agent_definition(f)
    return CreateAgent(ts, definition, name, prompt, provider, model,
                       f.text("clientRequestId", MAX_ID, required=False))


MAX_ENABLED_MODELS = 32   # the reference's bounds on a definition's lists
MAX_TOOLS = 32
MAX_TOOL_NAME = 128


def _agent_definition(f: _Fields) -> tuple[dict, str, str, str, str]:
    """The AgentDefinition CreateAgent and UpdateAgent both take, every field checked: (the map
    as sent, name, systemPrompt as Markdown, modelProvider, model). Whether the provider,
    reasoning level and signing keys fit the account is the handler's question."""
    definition = _bounded_definition(f)
    d = _Fields(definition, f"{f.name}.definition")
    checked = (definition, d.text("name", MAX_NAME), _system_prompt(d), d.text("modelProvider", MAX_NAME),
               d.text("model", MAX_NAME))
    level = d.text("reasoningLevel", MAX_NAME, required=False)
    if level is not None and level not in REASONING_LEVELS:
        raise d.fail("reasoningLevel", f"must be one of {', '.join(REASONING_LEVELS)}, got {quote(level)}")
    for i, ref in enumerate(_array(d, "enabledModels", MAX_ENABLED_MODELS)):
        if type(ref) is not dict:
            raise d.fail(f"enabledModels[{i}]", f"must be a map {{provider, model}}, got {_kind(ref)}")
        m = _Fields(ref, f"{d.name}.enabledModels[{i}]")
        m.text("provider", MAX_NAME)
        m.text("model", MAX_NAME)
    for i, tool in enumerate(_array(d, "tools", MAX_TOOLS)):
        _check_text(tool, MAX_TOOL_NAME, False, lambda p, i=i: d.fail(f"tools[{i}]", p))
    check_signing_keys(d)
    d.mapping("metadata", required=False)
    return checked


def _array(d: _Fields, field: str, limit: int) -> list:
    value = d.get(field, False)
    if value is None:
        return []
    if type(value) is not list:
        raise d.fail(field, f"must be an array, got {_kind(value)}")
    if len(value) > limit:
        raise d.fail(field, f"must have at most {limit} entries, got {len(value)}")
    return value


def _get_agent(f: _Fields, ts: int) -> GetAgent:
    return GetAgent(ts, f.text("agentId", MAX_ID))


def _create_session(f: _Fields, ts: int) -> CreateSession:
    return CreateSession(
        ts,
        f.text("agentId", MAX_ID),
        f.text("title", MAX_TITLE, required=False, allow_empty=True),
        f.text("clientRequestId", MAX_ID, required=False),
    )


def _boolean(f: _Fields, field: str) -> bool | None:
    value = f.get(field, False)
    if value is not None and type(value) is not bool:
        raise f.fail(field, f"must be a boolean, got {_kind(value)}")
    return value


def _session_cursor(f: _Fields) -> dict | None:
    """{updatedBefore, idBefore}: the nextCursor of the previous page, passed back verbatim."""
    raw = f.mapping("cursor", required=False)
    if raw is None:
        return None
    c = _Fields(raw, f"{f.name}.cursor")
    return {"updatedBefore": c.integer("updatedBefore", 0, None, required=True),
            "idBefore": c.text("idBefore", MAX_ID, allow_empty=True)}


def _agents_cursor(f: _Fields) -> dict | None:
    """{updatedBefore, idAfter}: ListAgents' nextCursor (newest update first, then id)."""
    raw = f.mapping("cursor", required=False)
    if raw is None:
        return None
    c = _Fields(raw, f"{f.name}.cursor")
    return {"updatedBefore": c.integer("updatedBefore", 0, None, required=True),
            "idAfter": c.text("idAfter", MAX_ID, allow_empty=True)}


def _list_agents(f: _Fields, ts: int) -> ListAgents:
    return ListAgents(ts, f.integer("limit", MIN_LIMIT, MAX_AGENTS_PAGE), _agents_cursor(f))


def _list_sessions(f: _Fields, ts: int) -> ListSessions:
    include = _boolean(f, "includeChildren")
    return ListSessions(
        ts,
        f.text("agentId", MAX_ID, required=False),
        f.integer("limit", MIN_LIMIT, MAX_LIMIT),
        _session_cursor(f),
        f.text("parentSessionId", MAX_ID, required=False),
        True if include is None else include,
    )


def _update_agent(f: _Fields, ts: int) -> UpdateAgent:
    agent_id = f.text("agentId", MAX_ID)
    definition, _name, _prompt, provider, _model = _agent_definition(f)
    return UpdateAgent(ts, agent_id, definition, provider)


def _model_override(f: _Fields) -> tuple[bool, dict | None]:
    """(present, value): absent leaves the override alone, null clears it (the one place the
    contract gives null a meaning), a map sets it."""
    if "modelOverride" not in f.action:
        return False, None
    raw = f.action["modelOverride"]
    if raw is None:
        return True, None
    if type(raw) is not dict:
        raise f.fail("modelOverride", f"must be a map {{provider, model, reasoningLevel?}} or null, "
                                      f"got {_kind(raw)}")
    m = _Fields(raw, f"{f.name}.modelOverride")
    value = {"provider": m.text("provider", MAX_NAME), "model": m.text("model", MAX_NAME)}
    level = m.text("reasoningLevel", MAX_NAME, required=False)
    if level is not None:
        if level not in REASONING_LEVELS:
            raise m.fail("reasoningLevel", f"must be one of {', '.join(REASONING_LEVELS)}, got {quote(level)}")
        value["reasoningLevel"] = level
    return True, value


def _update_session(f: _Fields, ts: int) -> UpdateSession:
    session_id = f.text("sessionId", MAX_ID)
    title = f.text("title", MAX_TITLE, required=False)
    present, override = _model_override(f)
    set_thoroughness, thoroughness = "thoroughness" in f.action, f.action.get("thoroughness")
    if thoroughness is not None and thoroughness not in THOROUGHNESS:
        got = quote(thoroughness) if type(thoroughness) is str else _kind(thoroughness)
        raise f.fail("thoroughness", f"must be one of {', '.join(THOROUGHNESS)} or null, got {got}")
    if title is None and not present and not set_thoroughness:
        raise f.fail("title", "or modelOverride or thoroughness is required (nothing to update)")
    return UpdateSession(ts, session_id, title, present, override, set_thoroughness, thoroughness)


_RUN_SELECTORS = ("rootRunId", "sessionId", "agentId")
RUN_STATUSES = ("queued", "claimed", "running", "waiting", "succeeded", "failed", "canceled")


def _list_runs(f: _Fields, ts: int) -> ListRuns:
    given = [(name, f.text(name, MAX_ID, required=False)) for name in _RUN_SELECTORS]
    given = [(name, value) for name, value in given if value is not None]
    if len(given) != 1:
        named = ", ".join(name for name, _ in given) or "none"
        raise ProtocolError(400, f"{f.name} needs exactly one of rootRunId, sessionId, agentId "
                                 f"(got {named})")
    status = f.text("status", MAX_NAME, required=False)
    if status is not None and status not in RUN_STATUSES:
        raise f.fail("status", f"must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
    return ListRuns(ts, given[0][0], given[0][1], status, f.integer("limit", MIN_LIMIT, MAX_LIMIT))



def _get_session(f: _Fields, ts: int) -> GetSession:
    return GetSession(
        ts,
        f.text("sessionId", MAX_ID),
        f.integer("afterSeq", 0, None),
        f.integer("limit", MIN_LIMIT, MAX_LIMIT),
    )


def _message_session(f: _Fields, ts: int) -> MessageSession:
    content = f.get("content", True)
    if type(content) is not list:
        raise f.fail("content", f"must be an array of parts, got {_kind(content)}")
    if not 1 <= len(content) <= MAX_CONTENT_PARTS:
        raise f.fail("content", f"must have between 1 and {MAX_CONTENT_PARTS} parts, "
                                f"got {len(content)}")
    parts: list[TextPart | ContextPart | AttachmentPart] = []
    attachments: list[str] = []
    texts: list[str] = []
    lines: list[str] = []
    for i, part in enumerate(content):
        where = f"content[{i}]"
        if type(part) is not dict:
            raise f.fail(where, f"must be a map {{type, ...}}, got {_kind(part)}")
        p = _Fields(part, f"{f.name}.{where}")
        kind = part.get("type")
        if kind == "text":
            text = p.text("text", MAX_MESSAGE_TEXT, allow_empty=True)
            texts.append(text)
            blocks = _blocks(p, "blocks", required=False)
            parts.append(TextPart(text, p.text("clientMessageId", MAX_ID, required=False),
                                  None if blocks is None else tuple(blocks)))
        elif kind == "context":
            part_lines = p.get("lines", True)
            if type(part_lines) is not list:
                raise p.fail("lines", f"must be an array of text, got {_kind(part_lines)}")
            for j, line in enumerate(part_lines):
                _check_text(line, MAX_CONTEXT_LINE, True, lambda m, j=j: p.fail(f"lines[{j}]", m))  # noqa: B023 (called now)
            lines.extend(part_lines)
            if len(lines) > MAX_CONTEXT_LINES:
                raise f.fail("content", f"has more than {MAX_CONTEXT_LINES} context lines")
            parts.append(ContextPart(tuple(part_lines)))
        elif kind == "attachment":
            ident = p.text("id", MAX_ID)
            if not _ATTACHMENT_ID.fullmatch(ident):
                raise p.fail("id", f"must be an attachment id (64 hexadecimal digits), got {quote(ident)}")
            if ident not in attachments:
                attachments.append(ident)
            if len(attachments) > MAX_MESSAGE_ATTACHMENTS:
                raise f.fail("content", f"has more than {MAX_MESSAGE_ATTACHMENTS} attachments")
            parts.append(AttachmentPart(ident))
        else:
            raise p.fail("type", f"must be 'text', 'context' or 'attachment', got {quote(kind)}")
    if not any(t.strip() for t in texts):
        raise f.fail("content", "needs at least one text part that is not blank")
    text = "\n".join(texts)
    if len(text) > MAX_MESSAGE_TEXT:
        raise f.fail("content", f"text must total at most {MAX_MESSAGE_TEXT} characters, "
                                f"got {len(text)}")
    return MessageSession(ts, f.text("sessionId", MAX_ID), tuple(parts), text, tuple(lines),
                          f.text("clientMessageId", MAX_ID, required=False), tuple(attachments))


def _list_model_providers(f: _Fields, ts: int) -> ListModelProviders:
    return ListModelProviders(ts, f.text("agentId", MAX_ID, required=False))


def _stop_session(f: _Fields, ts: int) -> StopSession:
    return StopSession(ts, f.text("sessionId", MAX_ID))


def _subscribe(f: _Fields, ts: int) -> Subscribe:
    key = f.text("key", len("sessions/") + MAX_ID)
    match = _SUBSCRIPTION_KEY.fullmatch(key)
    if match is None or len(match.group(2)) > MAX_ID:
        raise f.fail("key", "must be account/<accountId>, agents/<agentId>, "
                            f"sessions/<sessionId> or runs/<runId>, got {quote(key)}")
    return Subscribe(ts, key, match.group(1), match.group(2), f.integer("afterSeq", 0, None))


COLLABORATOR_ROLES = ("reader", "writer")


def _account_id(f: _Fields) -> str:
    """A collaborator's account: a valid principal string, as accounts are named everywhere."""
    value = f.text("accountId", MAX_ID)
    try:
        principal_from_string(value)
    except ProtocolError as exc:
        raise f.fail("accountId", f"must be an account id (z6Mk...): {exc.message}") from None
    return value


def _invite_agent_collaborator(f: _Fields, ts: int) -> InviteAgentCollaborator:
    agent_id, account_id = f.text("agentId", MAX_ID), _account_id(f)
    role = f.text("role", MAX_NAME)
    if role not in COLLABORATOR_ROLES:
        raise f.fail("role", f"must be 'reader' or 'writer', got {quote(role)}")
    return InviteAgentCollaborator(ts, agent_id, account_id, role)


def _set_agent_public_read(f: _Fields, ts: int) -> SetAgentPublicRead:
    agent_id = f.text("agentId", MAX_ID)
    value = f.get("publicRead", True)
    if type(value) is not bool:
        raise f.fail("publicRead", f"must be a boolean, got {_kind(value)}")
    return SetAgentPublicRead(ts, agent_id, value)



# Every action of the contract, one line each. The server's half (handler, inline) is in
# server/routes.py, which refuses to start unless both tables name the same actions.
ACTIONS: dict[str, ActionKind] = {
    "RegisterSigner": _write(_register_signer),
    "SetSecret": _write(_set_secret),
    "SetModelProvider": _write(_set_model_provider),
    "ListProviderModels": _read(_list_provider_models),
    "ListModelProviders": _read(_list_model_providers),
    "CreateAgent": _write(_create_agent),
    "GetAgent": _read(_get_agent),
    "ListAgents": _read(_list_agents),
    "CreateSession": _write(_create_session),
    "ListSessions": _read(_list_sessions),
    "GetSession": _read(_get_session),
    "MessageSession": _write(_message_session),
    "StopSession": _write(_stop_session),
    "Subscribe": _read(_subscribe),
    "UpdateAgent": _write(_update_agent),
    "DeleteAgent": _write(_id_action(DeleteAgent, "agentId")),
    "UpdateSession": _write(_update_session),
    "DeleteSession": _write(_id_action(DeleteSession, "sessionId")),
    "RetrySession": _write(_id_action(RetrySession, "sessionId")),
    "GetRun": _read(_id_action(GetRun, "runId")),
    "ListRuns": _read(_list_runs),
    "CancelRun": _write(_id_action(CancelRun, "runId")),
    "DeleteModelProvider": _write(lambda f, ts: DeleteModelProvider(ts, f.text("name", MAX_NAME))),
    "InviteAgentCollaborator": _write(_invite_agent_collaborator),
    "ListAgentCollaborators": _read(_id_action(ListAgentCollaborators, "agentId")),
    "RemoveAgentCollaborator": _write(lambda f, ts: RemoveAgentCollaborator(ts, f.text("agentId", MAX_ID),
                                                                            _account_id(f))),
    "ListAgentInvites": _read(_no_fields(ListAgentInvites)),
    "AcceptAgentInvite": _write(_id_action(AcceptAgentInvite, "agentId")),
    "DeclineAgentInvite": _write(_id_action(DeclineAgentInvite, "agentId")),
    "SetAgentPublicRead": _write(_set_agent_public_read),
    "UnregisterSigner": _write(_unregister_signer),
}
# Each area's actions live in a module of their own (protocol/actions_<area>.py).
for _area in (actions_identities, actions_files, actions_tools, actions_triggers, actions_history, actions_oauth,
              actions_public_chat):
    assert not ACTIONS.keys() & _area.ACTIONS.keys(), "an action is declared twice"
    ACTIONS.update(_area.ACTIONS)


def parse_action(action: dict) -> Action:
    """The typed action for a verified envelope's action map; ProtocolError(400) naming the
    field on any fault, or "unknown action 'X'"."""
    if type(action) is not dict:
        raise ProtocolError(400, f"an action must be a map, got {_kind(action)}")
    name = action.get("_")
    if type(name) is not str:
        raise ProtocolError(400, "an action needs a text field '_' naming it")
    kind = ACTIONS.get(name)
    if kind is None:
        raise ProtocolError(400, f"unknown action {quote(name)}")
    ts = action.get("ts")
    if type(ts) is not int:
        raise ProtocolError(400, f"{name}.ts must be an integer (Unix ms), got {_kind(ts)}")
    return kind.parse(_Fields(action, name), ts)


def request_fingerprint(action: dict) -> bytes:
    """sha256 of the DAG-CBOR action without `ts`: what "the same request" means for the
    idempotency ids (CONTRACT section 4), since a retry is signed again with a new ts."""
    return hashlib.sha256(encode({k: v for k, v in action.items() if k != "ts"})).digest()

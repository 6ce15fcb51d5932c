"""Tools, delegation and the run tree: tool documents, InvokeSessionTool, SignalRun, GetRunJournal, MCP servers (CONTRACT section 8).

Each action: its frozen dataclass, its parser (written with seed_agents.protocol.api.fields) and one line in
`ACTIONS`, which protocol/api/actions.py merges into the one table the server routes by.

The MCP actions are this server's (the reference protocol has none yet), named in its style:
ListMcpServers, SetMcpServer, DeleteMcpServer, RefreshMcpServer (docs/protocol.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..wire.dagcbor import encode
from ..wire.errors import quote
from .fields import (
    MAX_ID,
    MAX_LIMIT,
    MAX_NAME,
    MAX_URL,
    MIN_LIMIT,
    ActionKind,
    Fields,
    id_action,
    kind_of,
    no_fields,
    read,
    write,
)
from ..agent.tool_documents import BUILTINS, MCP_SEPARATOR, NAME_PATTERN, lambda_document

VERBS = ("read", "write", "call")
WRITE_VERBS = frozenset({"write", "call"})   # a reader may invoke `read` only
MAX_PAYLOAD_BYTES = 64 * 1024     # SignalRun.payload, InvokeSessionTool.input (DAG-CBOR)
MCP_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")   # no '_': `<server>__<tool>` must split one way
MAX_HEADERS = 32
MAX_HEADER_VALUE = 8 * 1024
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")


@dataclass(frozen=True)
class ListAgentTools:
    ts: int
    agent_id: str


@dataclass(frozen=True)
class SaveAgentTool:
    ts: int
    agent_id: str
    name: str
    doc: dict | None            # the checked lambda document; None: a builtin or mcp row's switch
    enabled: bool | None
    previous_name: str | None


@dataclass(frozen=True)
class DeleteAgentTool:
    ts: int
    agent_id: str
    name: str


@dataclass(frozen=True)
class InvokeSessionTool:
    ts: int
    session_id: str
    verb: str
    input: object


@dataclass(frozen=True)
class SignalRun:
    ts: int
    run_id: str
    signal: str
    payload: object = None


@dataclass(frozen=True)
class GetRunJournal:
    ts: int
    run_id: str
    after_seq: int = 0
    limit: int | None = None


@dataclass(frozen=True)
class ListMcpServers:
    ts: int


@dataclass(frozen=True)
class SetMcpServer:
    ts: int
    name: str
    url: str
    headers: dict            # plain headers, stored as given
    secret_headers: dict     # header -> value, each kept as a secret (mcp-<name>-<header>)
    enabled: bool


@dataclass(frozen=True)
class DeleteMcpServer:
    ts: int
    name: str


@dataclass(frozen=True)
class RefreshMcpServer:
    ts: int
    name: str


def _bounded_value(f: Fields, field: str, value: object) -> object:
    if value is not None and len(encode(value)) > MAX_PAYLOAD_BYTES:
        raise f.fail(field, f"must be at most {MAX_PAYLOAD_BYTES} bytes as DAG-CBOR")
    return value


def _flag(f: Fields, field: str, value: object) -> bool | None:
    if value is None:
        return None
    if type(value) is not bool:
        raise f.fail(field, f"must be a boolean, got {kind_of(value)}")
    return value


def _save_agent_tool(f: Fields, ts: int) -> SaveAgentTool:
    agent_id = f.text("agentId", MAX_ID)
    tool = f.mapping("tool")
    name = Fields(tool, f"{f.name}.tool").text("name", 200)
    enabled = _flag(f, "enabled", f.get("enabled", False))
    if enabled is None:
        enabled = _flag(f, "tool.enabled", tool.get("enabled"))
    previous = f.text("previousName", 200, required=False)
    if name in BUILTINS or MCP_SEPARATOR in name:
        # A builtin (or an MCP projection) is not authored: saving it only switches it.
        if enabled is None:
            raise f.fail("enabled", f"is required for {quote(name)}, which is not an authored tool "
                                    "(builtins and MCP tools are only enabled or disabled)")
        return SaveAgentTool(ts, agent_id, name, None, enabled, None)
    if previous is not None and not NAME_PATTERN.fullmatch(previous):
        raise f.fail("previousName", "is not a tool name")
    return SaveAgentTool(ts, agent_id, name, lambda_document(tool, f"{f.name}.tool"), enabled, previous)


def _invoke_session_tool(f: Fields, ts: int) -> InvokeSessionTool:
    session_id = f.text("sessionId", MAX_ID)
    verb = f.text("verb", 20)
    if verb not in VERBS:
        raise f.fail("verb", f"must be one of {', '.join(VERBS)}, got {quote(verb)}")
    value = f.get("input", True)
    return InvokeSessionTool(ts, session_id, verb, _bounded_value(f, "input", value))


def _signal_run(f: Fields, ts: int) -> SignalRun:
    return SignalRun(ts, f.text("runId", MAX_ID), f.text("signal", MAX_NAME),
                     _bounded_value(f, "payload", f.get("payload", False)))


def _get_run_journal(f: Fields, ts: int) -> GetRunJournal:
    return GetRunJournal(ts, f.text("runId", MAX_ID), f.integer("afterSeq", 0, None) or 0,
                         f.integer("limit", MIN_LIMIT, MAX_LIMIT))


def mcp_server_name(f: Fields) -> str:
    name = f.text("name", MAX_NAME)
    if not MCP_NAME.fullmatch(name):
        raise f.fail("name", "must be lowercase letters, digits and '-', start with a letter, at most 32 "
                             f"characters (its tools are named <name>{MCP_SEPARATOR}<tool>), got {quote(name)}")
    return name


def _header_map(f: Fields, field: str) -> dict:
    value = f.mapping(field, required=False) or {}
    if len(value) > MAX_HEADERS:
        raise f.fail(field, f"must have at most {MAX_HEADERS} headers")
    out = {}
    for key, text in value.items():
        if type(key) is not str or not _HEADER_NAME.fullmatch(key):
            raise f.fail(field, f"has a header name that is not a token: {quote(key)}")
        if type(text) is not str or len(text) > MAX_HEADER_VALUE or any(c in text for c in "\r\n\0"):
            raise f.fail(f"{field}.{key}", f"must be text of at most {MAX_HEADER_VALUE} characters on one line")
        out[key.lower()] = text
    return out


def _set_mcp_server(f: Fields, ts: int) -> SetMcpServer:
    name = mcp_server_name(f)
    url = f.text("url", MAX_URL)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise f.fail("url", f"must be an http:// or https:// URL, got {quote(url)}")
    if parts.username or parts.password:
        raise f.fail("url", "must not carry credentials; put them in secretHeaders")
    transport = f.text("transport", 40, required=False)
    if transport not in (None, "streamable-http"):
        raise f.fail("transport", f"must be streamable-http (the only transport served), got {quote(transport)}")
    headers, secret = _header_map(f, "headers"), _header_map(f, "secretHeaders")
    both = headers.keys() & secret.keys()
    if both:
        raise f.fail("secretHeaders", f"names a header also in headers: {quote(sorted(both)[0])}")
    enabled = _flag(f, "enabled", f.get("enabled", False))
    return SetMcpServer(ts, name, url, headers, secret, True if enabled is None else enabled)


ACTIONS: dict[str, ActionKind] = {
    "ListAgentTools": read(id_action(ListAgentTools, "agentId")),
    "SaveAgentTool": write(_save_agent_tool),
    "DeleteAgentTool": write(lambda f, ts: DeleteAgentTool(ts, f.text("agentId", MAX_ID), f.text("name", 200))),
    "InvokeSessionTool": write(_invoke_session_tool),
    "SignalRun": write(_signal_run),
    "GetRunJournal": read(_get_run_journal),
    "ListMcpServers": read(no_fields(ListMcpServers)),
    "SetMcpServer": write(_set_mcp_server),
    "DeleteMcpServer": write(lambda f, ts: DeleteMcpServer(ts, mcp_server_name(f))),
    "RefreshMcpServer": write(lambda f, ts: RefreshMcpServer(ts, mcp_server_name(f))),
}

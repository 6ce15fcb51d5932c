"""Tool documents: every tool an agent holds, as a content-addressed document.

ToolDocument = {name, kind: builtin|lambda|mcp, summary, description, input, output?, source?,
runtime?, binding?, server?, remoteName?} (the reference's agents/src/tool-documents.ts, plus the
storage design's mcp projection). Its CID is the CIDv1 (dag-cbor, sha2-256) of its canonical
DAG-CBOR encoding, the encoding the hypermedia network uses for blobs: the CID is the tool's
version, and it changes with every edit.

Authored (lambda) documents are checked before they are stored, with the reference's rules:
name ^[a-z][a-z0-9_-]{1,63}$, description at most 16 KiB, source at most 256 KiB, input and
output schemas that are valid JSON Schema; a lambda may not take a builtin's or a verb's name.
"""
from __future__ import annotations

import re

from . import tool_registry as registry
from ..wire.capability import capability_cid
from ..wire.dagcbor import encode
from ..wire.errors import ProtocolError, quote

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{1,63}")
MAX_SOURCE_BYTES = 256 * 1024
MAX_TEXT_BYTES = 16 * 1024
MAX_SCHEMA_BYTES = 64 * 1024
RUNTIMES = ("typescript", "python")
MCP_SEPARATOR = "__"
_OBJECT = {"type": "object"}

# Builtin documents are the callable tools of the shipped registry (protocol/agent/tool_registry.py,
# as the reference materializes its callableToolRegistry); the verbs are always on and are not
# documents. `binding` is the executor id; a builtin row is rewritten when its CID changes.
BUILTINS = registry.CALLABLES
# Names no authored document may take: every tool and verb of the registry (return_result too).
RESERVED = frozenset(registry.TOOLS)


def encode_document(doc: dict) -> tuple[str, bytes]:
    """(cid, canonical DAG-CBOR bytes) of a tool document."""
    data = encode(doc)
    return capability_cid(data), data


def summary_from_description(description: str) -> str:
    """One line: the description's first sentence, at most 140 characters."""
    first = re.split(r"(?<=\.)\s", description, maxsplit=1)[0]
    return first if len(first) <= 140 else first[:137] + "…"


def builtin_document(name: str) -> dict:
    tool = BUILTINS[name]
    doc = {"name": name, "kind": "builtin", "summary": summary_from_description(tool.description),
           "description": tool.description, "input": tool.input_schema, "binding": name}
    if tool.output_schema is not None:
        doc["output"] = tool.output_schema
    return doc


_BUILTIN_CIDS: dict[str, tuple[object, dict, str]] = {}


def builtin_with_cid(name: str) -> tuple[dict, str]:
    """(document, CID) of a builtin tool, encoded once per process and again only when its
    registry record is replaced: every run's start compares each builtin with the agent's stored
    one, and encoding them all each time was a tenth of a turn's cost (docs/performance.md).
    Callers must not change the document returned."""
    tool = BUILTINS[name]
    cached = _BUILTIN_CIDS.get(name)
    if cached is None or cached[0] is not tool:
        doc = builtin_document(name)
        cached = (tool, doc, encode_document(doc)[0])
        _BUILTIN_CIDS[name] = cached
    return cached[1], cached[2]


def check_schema(schema: object, where: str) -> dict:
    """A JSON Schema (a map the 2020-12 meta-schema accepts), else 400 naming `where`."""
    if type(schema) is not dict:
        raise ProtocolError(400, f"{where} must be a JSON Schema map")
    if len(encode(schema)) > MAX_SCHEMA_BYTES:
        raise ProtocolError(400, f"{where} is larger than {MAX_SCHEMA_BYTES} bytes")
    import jsonschema  # (at first use: a tenth of a second to import)

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ProtocolError(400, f"{where} is not a valid JSON Schema: {quote(exc.message, 200)}") from None
    return schema


def schema_errors(schema: dict, value: object, limit: int = 5) -> list[str]:
    """Why `value` does not fit `schema` (at most `limit` reasons, each naming its place); [] when
    it fits. `schema` was checked with check_schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for error in validator.iter_errors(value):
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        out.append(f"{where}: {error.message[:300]}")
        if len(out) >= limit:
            break
    return out


def lambda_document(tool: dict, where: str = "SaveAgentTool.tool") -> dict:
    """The lambda document of an AgentToolInput, checked; 400 naming the field otherwise."""
    def fail(field: str, problem: str) -> ProtocolError:
        return ProtocolError(400, f"{where}.{field} {problem}")

    name = tool.get("name")
    if type(name) is not str or not NAME_PATTERN.fullmatch(name):
        raise fail("name", "must be lowercase [a-z0-9_-], start with a letter, 2-64 characters")
    if name in RESERVED:
        raise fail("name", f"{quote(name)} is a builtin tool or verb and cannot be replaced")
    if MCP_SEPARATOR in name:
        raise fail("name", f"must not contain {MCP_SEPARATOR!r}, which names remote MCP tools")
    description = tool.get("description")
    if type(description) is not str or not description.strip():
        raise fail("description", "is required")
    description = description.strip()
    if len(description.encode("utf-8")) > MAX_TEXT_BYTES:
        raise fail("description", f"must be at most {MAX_TEXT_BYTES} bytes")
    source = tool.get("source")
    if type(source) is not str or not source.strip():
        raise fail("source", "is required (a lambda carries its code)")
    if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise fail("source", f"must be at most {MAX_SOURCE_BYTES} bytes")
    runtime = tool.get("runtime", "typescript")
    if runtime not in RUNTIMES:
        raise fail("runtime", f"must be one of {', '.join(RUNTIMES)}")
    doc: dict = {"name": name, "kind": "lambda", "description": description,
                 "input": check_schema(tool.get("input", _OBJECT), f"{where}.input"),
                 "source": source, "runtime": runtime}
    if tool.get("output") is not None:
        doc["output"] = check_schema(tool["output"], f"{where}.output")
    summary = tool.get("summary")
    doc["summary"] = (summary.strip()[:140] if type(summary) is str and summary.strip()
                      else summary_from_description(description))
    return doc


def mcp_document(server: str, tool: dict) -> dict:
    """The projection of one remote MCP tool (McpToolInfo {name, description?, inputSchema}) as
    the document `<server>__<tool>`."""
    description = tool.get("description") or f"{tool['name']} on the MCP server {server}"
    return {"name": server + MCP_SEPARATOR + tool["name"], "kind": "mcp",
            "summary": summary_from_description(description), "description": description,
            "input": tool.get("inputSchema") or _OBJECT, "server": server, "remoteName": tool["name"]}


def tool_info(doc: dict, cid: str, enabled: bool, granted: bool, created_at: int, updated_at: int) -> dict:
    """AgentToolInfo: the document's fields, its CID and state."""
    info = {k: doc[k] for k in ("name", "kind", "summary", "description", "input") if k in doc}
    for key in ("output", "source", "runtime", "server", "remoteName"):
        if key in doc:
            info[key] = doc[key]
    info.update({"cid": cid, "enabled": enabled, "granted": granted, "createdAt": created_at,
                 "updatedAt": updated_at})
    return info

"""Calling an agent's MCP tool document `<server>__<tool>` (the `call` verb, InvokeSessionTool).

The document must be enabled and its server still connected and enabled; the input is checked
against the tool's input schema before anything is sent; the call runs under the provider
network policy and --mcp-timeout (server/mcp/remote.py). The answer is (output, error): a
tool-level failure, a bad input or an unreachable server is an error string for the caller to
record; nothing here raises for the remote side's faults.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import quote
from seed_agents.protocol.agent.tool_documents import schema_errors

from ..providers.network import NetworkPolicy
from ..store import mcp_servers as mcp_q
from ..store import secrets_table as secrets_q
from ..store import tool_documents as tools_q
from .remote import McpError, Remote


def _remote(conn, box, config, server: dict) -> Remote:  # noqa: ANN001
    cfg = server["config"]
    headers = dict(cfg.get("headers") or {})
    for header, secret in (cfg.get("secretRefs") or {}).items():
        value = secrets_q.read_secret(conn, box, server["account"], secret)
        if value is not None:
            headers[header] = value.decode("utf-8", "replace")
    return Remote(cfg["url"], headers, NetworkPolicy.for_server(config.provider_networks, config.host),
                  config.mcp_timeout)


async def call_mcp_tool(db, box, config, account_id: str, agent_id: str, name: str,  # noqa: ANN001
                        arguments: object) -> tuple[object, str | None]:
    def read(conn):
        row = tools_q.get_document(conn, account_id, agent_id, name)
        if row is None or row["doc"]["kind"] != "mcp":
            return None, f"no MCP tool {quote(name)} for this agent (its server may have been removed)"
        if not row["enabled"]:
            return None, f"the tool {quote(name)} is disabled for this agent"
        doc = row["doc"]
        server = mcp_q.get_server(conn, account_id, doc["server"])
        if server is None or not server["enabled"]:
            return None, f"the MCP server {quote(doc['server'])} is not connected"
        return (doc, _remote(conn, box, config, server)), None

    found, error = db.read(read)
    if error is not None:
        return None, error
    doc, remote = found
    if type(arguments) is not dict:
        return None, f"the input of {name} must be a map"
    problems = schema_errors(doc["input"], arguments)
    if problems:
        return None, f"the input does not fit {name}'s input schema: " + "; ".join(problems)
    try:
        return await remote.call(doc["remoteName"], arguments, account_id)
    except McpError as exc:
        return None, exc.message

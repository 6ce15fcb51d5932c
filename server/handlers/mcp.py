"""ListMcpServers, SetMcpServer, DeleteMcpServer, RefreshMcpServer: an account's remote MCP servers.

These four are this server's (the reference protocol has no MCP actions yet; docs/protocol.md):
- SetMcpServer {name, url, transport?, headers?, secretHeaders?, enabled?} saves the server (each
  secret header sealed as the secret `mcp-<name>-<header>`, named in the config, never returned),
  then discovers its tools; a failed discovery still saves, with `status.state: "error"`.
- RefreshMcpServer {name} discovers again; on failure the last good tool list is kept, the status
  records the failure and the answer is 502 with a fixed phrase.
- DeleteMcpServer {name} removes the server, its owned secrets, every agent's `<name>__*` tool
  documents, and the name from agents' `definition.mcpServers`.
- ListMcpServers {} lists them (McpServerInfo, tools as {name, description?}).
Bounds: --mcp-max-servers per account (409 for a new name past it), --mcp-max-tools per server
and --mcp-max-schema-bytes per tool (the rest left out, counted in `status.skipped`), and the
whole discovery, fetching and checking, within --mcp-timeout (server/mcp/remote.py).
The servers are the caller's own: an agent uses those of its owner that its definition picks.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..clock import new_id
from ..mcp.remote import McpError, McpLimits, Remote
from ..providers.network import NetworkPolicy
from ..store import agent_lifecycle as lifecycle_q
from ..store import agents as agents_q
from ..store import mcp_servers as mcp_q
from ..store import secrets_table as secrets_q
from ..store import tool_documents as tools_q
from .context import HandlerContext

TRANSPORT = "streamable-http"


def server_info(server: dict) -> dict:
    """McpServerInfo: what may be shown (secret header names, never their values)."""
    config = server["config"]
    info = {"id": server["id"], "name": server["name"], "url": config["url"], "transport": TRANSPORT,
            "headers": config.get("headers") or {}, "secretHeaders": sorted(config.get("secretRefs") or {}),
            "enabled": server["enabled"], "toolCount": len(server["tools"]),
            "tools": [{"name": t["name"], **({"description": t["description"][:200]} if "description" in t else {})}
                      for t in server["tools"]],
            "status": server["status"], "createdAt": server["createdAt"], "updatedAt": server["updatedAt"]}
    return info


def policy(ctx: HandlerContext) -> NetworkPolicy:
    return NetworkPolicy.for_server(ctx.config.provider_networks, ctx.config.host)


def remote_for(ctx: HandlerContext, conn, server: dict) -> Remote:  # noqa: ANN001
    """The Remote for a stored server, its secret headers opened (inside a read)."""
    config = server["config"]
    headers = dict(config.get("headers") or {})
    for header, secret in (config.get("secretRefs") or {}).items():
        value = secrets_q.read_secret(conn, ctx.secrets, server["account"], secret)
        if value is not None:
            headers[header] = value.decode("utf-8", "replace")
    return Remote(config["url"], headers, policy(ctx), ctx.config.mcp_timeout,
                  McpLimits(ctx.config.mcp_max_tools, ctx.config.mcp_max_schema_bytes))


async def discover(ctx: HandlerContext, account_id: str, name: str) -> tuple[dict, str | None]:
    """Discover the server's tools and record the outcome; (server, error phrase or None)."""
    server = ctx.db.read(mcp_q.get_server, account_id, name)
    if server is None:
        raise ProtocolError(404, f"MCP server {quote(name)} not found")
    remote = ctx.db.read(lambda conn: remote_for(ctx, conn, server))
    error = None
    try:
        tools, skipped = await remote.discover(account_id)
        status = {"state": "ok", "checkedAt": ctx.now_ms()}
        if skipped:
            status["skipped"] = skipped
    except McpError as exc:
        tools, error = None, exc.message
        status = {"state": "error", "error": exc.message, "checkedAt": ctx.now_ms()}
    now = ctx.now_ms()

    def job(conn):
        saved = mcp_q.set_discovery(conn, account_id, name, tools, status, now)
        if saved is not None:
            for agent in mcp_q.agents_picking(conn, account_id, name):
                tools_q.sync_mcp(conn, account_id, agent["id"], agent["definition"].get("mcpServers") or [], now)
        return saved

    saved = await ctx.db.write(job)
    if saved is None:
        raise ProtocolError(404, f"MCP server {quote(name)} not found")
    return saved, error


async def list_mcp_servers(ctx: HandlerContext, env, action) -> dict:
    servers = await ctx.db.aread(mcp_q.list_servers, env.account_id)
    return {"_": "ListMcpServersResponse", "servers": [server_info(s) for s in servers]}


async def set_mcp_server(ctx: HandlerContext, env, action) -> dict:
    account, name, now = env.account_id, action.name, ctx.now_ms()
    sealed = {header: (mcp_q.secret_name(name, header),
                       ctx.secrets.seal(value.encode("utf-8"),
                                        secrets_q.secret_aad(account, mcp_q.secret_name(name, header))))
              for header, value in action.secret_headers.items()}

    def job(conn):
        before = mcp_q.get_server(conn, account, name)
        limit = ctx.config.mcp_max_servers
        if before is None and mcp_q.count_servers(conn, account) >= limit:
            raise ProtocolError(409, f"this account has {limit} MCP servers, the most it may have on this server "
                                     "(--mcp-max-servers); delete one first")
        config = {"url": action.url, "transport": TRANSPORT, "enabled": action.enabled}
        if action.headers:
            config["headers"] = action.headers
        if sealed:
            config["secretRefs"] = {header: secret for header, (secret, _) in sealed.items()}
        for header, (secret, ciphertext) in sealed.items():
            secrets_q.set_secret(conn, account, secret, ciphertext, {"mcpServer": name, "header": header}, now,
                                 new_id())
        if before is not None:   # secrets of headers no longer sent go
            for header, secret in (before["config"].get("secretRefs") or {}).items():
                if header not in sealed:
                    secrets_q.delete_secret(conn, account, secret)
        return mcp_q.put_server(conn, account, name, config, now, new_id())

    saved = await ctx.db.write(job)
    if saved["enabled"]:
        saved, _error = await discover(ctx, account, name)
    else:
        def unproject(conn):
            for agent in mcp_q.agents_picking(conn, account, name):
                tools_q.sync_mcp(conn, account, agent["id"], agent["definition"].get("mcpServers") or [], now)
        await ctx.db.write(unproject)
    return {"_": "SetMcpServerResponse", "server": server_info(saved)}


async def refresh_mcp_server(ctx: HandlerContext, env, action) -> dict:
    server = await ctx.db.aread(mcp_q.get_server, env.account_id, action.name)
    if server is None:
        raise ProtocolError(404, f"MCP server {quote(action.name)} not found")
    saved, error = await discover(ctx, env.account_id, action.name)
    if error is not None:
        raise ProtocolError(502, f"MCP server {action.name}: {error}; its last discovered tools are kept")
    return {"_": "RefreshMcpServerResponse", "server": server_info(saved)}


async def delete_mcp_server(ctx: HandlerContext, env, action) -> dict:
    account, name, now = env.account_id, action.name, ctx.now_ms()

    def job(conn):
        removed = mcp_q.delete_server(conn, account, name)
        if removed is None:
            return False, []
        tools_q.delete_server_documents(conn, account, name)
        changed = []
        for agent in mcp_q.agents_picking(conn, account, name):
            definition = dict(agent["definition"])
            definition["mcpServers"] = [s for s in definition["mcpServers"] if s != name]
            lifecycle_q.set_definition(conn, agent["id"], definition, now)
            changed.append(agents_q.get_agent(conn, agent["id"]))
        return True, changed

    deleted, changed = await ctx.db.write(job)
    for agent in changed:
        ctx.broadcaster.publish_agent(agent)
    return {"_": "DeleteMcpServerResponse", "name": name, "deleted": deleted}

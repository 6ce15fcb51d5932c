"""Remote MCP servers an account connected (the `mcp_servers` table), by name.

config = {url, transport: "streamable-http", headers?, secretRefs?: {header: secret name}}: a
secret header's value lives in `secrets` as `mcp-<server>-<header>` and only its name is here.
`tools` is the McpToolInfo list of the last successful discovery ({name, description?,
inputSchema}); a failed refresh changes `status` only, so the tools stay usable.
"""
from __future__ import annotations

from . import agents as agents_q
from . import codec

_COLUMNS = "id, account_id, name, config, tools, status, created_at, updated_at"


def secret_name(server: str, header: str) -> str:
    return f"mcp-{server}-{header.lower()}"


def _server(row: tuple) -> dict:
    server_id, account_id, name, config, tools, status, created_at, updated_at = row
    config = codec.decode(config)
    return {"id": server_id, "account": account_id, "name": name, "config": config,
            "enabled": config.get("enabled", True), "tools": [] if tools is None else codec.decode(tools),
            "status": {"state": "unknown"} if status is None else codec.decode(status),
            "createdAt": created_at, "updatedAt": updated_at}


def list_servers(conn, account_id: str) -> list[dict]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM mcp_servers WHERE account_id = ? ORDER BY name",
                        (account_id,)).fetchall()
    return [_server(r) for r in rows]


def count_servers(conn, account_id: str) -> int:
    return conn.execute("SELECT count(*) FROM mcp_servers WHERE account_id = ?", (account_id,)).fetchone()[0]


def get_server(conn, account_id: str, name: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM mcp_servers WHERE account_id = ? AND name = ?",
                       (account_id, name)).fetchone()
    return None if row is None else _server(row)


def put_server(conn, account_id: str, name: str, config: dict, now: int, server_id: str) -> dict:
    """Create or replace the server's config (its last discovery and status are kept)."""
    conn.execute("INSERT INTO mcp_servers (id, account_id, name, config, created_at, updated_at)"
                 " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, name) DO UPDATE SET"
                 " config = excluded.config, updated_at = excluded.updated_at",
                 (server_id, account_id, name, codec.encode(config), now, now))
    return get_server(conn, account_id, name)


def set_discovery(conn, account_id: str, name: str, tools: list | None, status: dict, now: int) -> dict | None:
    """Record a discovery: `tools` replaces the list (None: it failed and the old list stays)."""
    if tools is None:
        conn.execute("UPDATE mcp_servers SET status = ?, updated_at = ? WHERE account_id = ? AND name = ?",
                     (codec.encode(status), now, account_id, name))
    else:
        conn.execute("UPDATE mcp_servers SET tools = ?, status = ?, updated_at = ? WHERE account_id = ? AND name = ?",
                     (codec.encode(tools), codec.encode(status), now, account_id, name))
    return get_server(conn, account_id, name)


def delete_server(conn, account_id: str, name: str) -> dict | None:
    """Remove the row and its owned secrets; the removed server, or None."""
    server = get_server(conn, account_id, name)
    if server is None:
        return None
    conn.execute("DELETE FROM mcp_servers WHERE account_id = ? AND name = ?", (account_id, name))
    for secret in (server["config"].get("secretRefs") or {}).values():
        conn.execute("DELETE FROM secrets WHERE account_id = ? AND name = ?", (account_id, secret))
    return server


def agents_picking(conn, account_id: str, name: str) -> list[dict]:
    """The account's agents whose definition.mcpServers names the server."""
    out = []
    for agent in agents_q.list_agents(conn, account_id):
        picked = agent["definition"].get("mcpServers")
        if type(picked) is list and name in picked:
            out.append(agent)
    return out

"""`mcp add/ls/rm/refresh`: the remote MCP servers (Streamable HTTP) your agents may use. An agent
uses those its definition's `mcpServers` names; each remote tool becomes `<server>__<tool>`.

A secret header's value never travels on the command line (shell history, `ps`): it is read from
a file (`--secret-header NAME=FILE`, `-` for stdin) and kept on the server as a secret.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..render import as_json, table
from .common import CliError, open_client, say


def server_line(server: dict) -> str:
    status = server.get("status") or {}
    state = status.get("state", "?")
    if status.get("error"):
        state += f" ({status['error']})"
    return f"{server['name']}  {server['url']}  {server.get('toolCount', 0)} tools  {state}"


def _pairs(values: list[str] | None, what: str) -> list[tuple[str, str]]:
    out = []
    for value in values or ():
        name, sep, rest = value.partition("=")
        if not sep or not name:
            raise CliError(f"{what} must be NAME=VALUE, got {value!r}", code=2)
        out.append((name, rest))
    return out


def _read_secret(path: str) -> str:
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).expanduser().read_text()
    except OSError as exc:
        raise CliError(f"cannot read the secret header file {path}: {exc.strerror or exc}", code=2) from None
    return raw.strip("\r\n")


async def add(args) -> int:
    headers = dict(_pairs(args.header, "--header"))
    secrets = {name: _read_secret(path) for name, path in _pairs(args.secret_header, "--secret-header")}
    async with open_client(args) as client:
        response = await client.set_mcp_server(args.name, args.endpoint, headers, secrets)
    server = response["server"]
    print(server_line(server))
    if server.get("status", {}).get("state") == "error":
        say("saved, but its tools could not be listed yet: `seed-agents mcp refresh` tries again")
        return 1
    return 0


async def list_(args) -> int:
    async with open_client(args) as client:
        response = await client.list_mcp_servers()
    servers = response.get("servers", [])
    if args.json:
        print(as_json(servers))
        return 0
    if not servers:
        say("no MCP servers yet: `seed-agents mcp add NAME URL` connects one")
        return 0
    rows = []
    for server in servers:
        status = server.get("status") or {}
        state = status.get("state", "?") + (f" ({status['error']})" if status.get("error") else "")
        rows.append([str(server["name"]), str(server["url"]), str(server.get("toolCount", 0)), state])
    print(table(["NAME", "URL", "TOOLS", "STATE"], rows))
    if args.tools:
        tools = [[f"{server['name']}__{tool['name']}", " ".join(str(tool.get("description", "")).split())[:100]]
                 for server in servers for tool in server.get("tools", [])]
        if tools:
            print()
            print(table(["TOOL", "DESCRIPTION"], tools))
    return 0


async def remove(args) -> int:
    async with open_client(args) as client:
        response = await client.delete_mcp_server(args.name)
    if not response.get("deleted"):
        raise CliError(f"no MCP server named {args.name}")
    say(f"removed {args.name}, its tools and its secret headers")
    return 0


async def refresh(args) -> int:
    async with open_client(args) as client:
        response = await client.refresh_mcp_server(args.name)
    print(server_line(response["server"]))
    return 0


def register(sub, common) -> None:
    mcp = sub.add_parser("mcp", help="remote MCP servers your agents may use",
                         description="Remote MCP servers (Streamable HTTP): add, list, remove, refresh. "
                                     "An agent uses those its definition's mcpServers names "
                                     "(`seed-agents agents update AGENT --add-mcp NAME`).")
    msub = mcp.add_subparsers(dest="mcp_command", metavar="{add,ls,rm,refresh}", required=True)
    p = msub.add_parser("add", parents=[common], help="connect (or change) a server and list its tools",
                        description="Connect a remote MCP server by name (or change it) and discover its tools.")
    p.add_argument("name", metavar="NAME", help="lowercase letters, digits and '-'")
    p.add_argument("endpoint", metavar="URL", help="its Streamable HTTP endpoint, e.g. https://host/mcp")
    p.add_argument("--header", action="append", metavar="NAME=VALUE", help="a plain header to send")
    p.add_argument("--secret-header", action="append", metavar="NAME=FILE",
                   help="a header whose value is read from FILE (- for stdin) and kept as a secret")
    p.set_defaults(run=add)
    p = msub.add_parser("ls", parents=[common], help="list your MCP servers",
                        description="List MCP servers: name, URL, tools, state of the last discovery.")
    p.add_argument("--tools", action="store_true", help="also list each server's tools")
    p.add_argument("--json", action="store_true", help="print the servers as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = msub.add_parser("rm", parents=[common], help="remove a server, its tools and its secrets",
                        description="Remove an MCP server: agents lose its tools; its secret headers go.")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(run=remove)
    p = msub.add_parser("refresh", parents=[common], help="discover a server's tools again",
                        description="Discover a server's tools again (on failure the last list is kept).")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(run=refresh)

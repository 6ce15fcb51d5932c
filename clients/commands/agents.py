"""`agents create`, `agents list`, `agents show`, `agents update` and `agents delete`.

`update` changes any field of a definition. UpdateAgent replaces the whole definition (CONTRACT),
so the command reads the stored one, applies the flags to it and sends the result, then shows
each field that changed, before and after.
"""
from __future__ import annotations

import contextlib
import json
import sys
import uuid
from pathlib import Path

from seed_agents.protocol.agent import tool_registry as registry

from ..client import merged_definition
from ..errors import AgentsError
from ..render import as_json, when
from .common import CliError, open_client, print_listing, say
from .resolve import agent_id, all_agents, pick, provider_model


async def create(args) -> int:
    # Without --model: echo's own, or the one the provider was set with (`providers set --model`).
    model = args.model or (args.provider if args.provider == "echo" else await provider_model(args, args.provider))
    definition = {"name": args.name, "systemPrompt": args.system_prompt,
                  "modelProvider": args.provider, "model": model}
    async with open_client(args) as client:
        identity = None
        if not args.no_identity:
            # As the Seed desktop does: the agent gets an account of its own first, named after it.
            identity = (await client.create_signing_identity(args.name, str(uuid.uuid4())))["identity"]
            definition.update(signingKey=identity["name"], signingKeys=[identity["name"]])
        try:
            response = await client.create_agent(definition)
        except AgentsError:
            if identity is not None:   # no orphan account left behind (the desktop does the same)
                with contextlib.suppress(AgentsError):
                    await client.delete_signing_identity(identity["name"])
            raise
    print(response["agentId"])
    return 0


async def list_(args) -> int:
    async with open_client(args) as client:
        agents = await all_agents(client)

    def row(a: dict) -> list[str]:
        definition = a.get("definition") or {}
        return [str(a.get("id", "")), str(definition.get("name", "")), str(a.get("status", "")),
                f"{definition.get('modelProvider', '')}/{definition.get('model', '')}", when(a.get("updatedAt"))]

    return print_listing(agents, args.json, ["ID", "NAME", "STATUS", "PROVIDER/MODEL", "UPDATED"], row,
                         "no agents yet: `seed-agents agents create --name NAME` (or `seed-agents chat`) makes one")


async def show(args) -> int:
    async with open_client(args) as client:
        agent = (await client.get_agent(await agent_id(client, args.agent_id)))["agent"]
    if args.json:
        print(as_json(agent))
        return 0
    print(f"id:       {agent['id']}")
    print(f"status:   {agent.get('status', '')}")
    print(f"updated:  {when(agent.get('updatedAt'))}")
    for key, value in sorted((agent.get("definition") or {}).items()):
        print(f"{key + ':':<15} {_shown(value)}")
    return 0


def _shown(value) -> str:
    """A definition field on one line: text as it is (newlines shown as ⏎), the rest as JSON."""
    if isinstance(value, str):
        return value.replace("\n", " ⏎ ") if value else '""'
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _with(values: list, add: list[str], remove: list[str]) -> list:
    out = [v for v in values if v not in remove]
    return out + [v for v in add if v not in out]


async def _identity_name(client, wanted: str) -> str:
    """An identity by its name, its label or the start of its account id (the one resolver's rule)."""
    identities = (await client.list_signing_identities()).get("identities", [])
    items = [{**i, "id": i.get("name", "")} for i in identities]
    exact = [i for i in items if wanted in (i.get("label"), i.get("accountId"))]
    if len(exact) == 1:
        return exact[0]["id"]
    return pick("identity", wanted, items, lambda i: str(i.get("label") or ""), "seed-agents identities list")


def _prompt(args) -> str | None:
    if args.system_prompt_file is None:
        return args.system_prompt
    try:
        return sys.stdin.read() if args.system_prompt_file == "-" else Path(args.system_prompt_file).read_text()
    except OSError as exc:
        raise CliError(f"cannot read {args.system_prompt_file}: {exc.strerror or exc}", code=2) from None


async def update(args) -> int:
    changes: dict = {}
    for item in args.set or ():
        field, sep, raw = item.partition("=")
        if not sep or not field:
            raise CliError(f"--set takes FIELD=JSON, got {item!r}", code=2)
        try:
            changes[field] = json.loads(raw)
        except ValueError:
            raise CliError(f"--set {field}: {raw!r} is not JSON (a text needs quotes: --set {field}='\"...\"')",
                           code=2) from None
    for field in args.unset or ():
        changes[field] = None
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent_id)
        before = (await client.get_agent(agent))["agent"]["definition"]
        if args.name is not None:
            changes["name"] = args.name
        prompt = _prompt(args)
        if prompt is not None:
            changes["systemPrompt"] = prompt
        if args.provider is not None:
            changes["modelProvider"] = args.provider
            if args.model is None and args.provider != before.get("modelProvider"):
                changes["model"] = "echo" if args.provider == "echo" else await provider_model(args, args.provider)
        if args.model is not None:
            changes["model"] = args.model
        if args.reasoning is not None:
            changes["reasoningLevel"] = None if args.reasoning == "off" else args.reasoning
        if args.add_mcp or args.remove_mcp:
            changes["mcpServers"] = _with(list(before.get("mcpServers") or []), args.add_mcp or [],
                                          args.remove_mcp or [])
        if args.grant or args.revoke:
            current = before.get("tools")
            if not isinstance(current, list):   # no list: every configurable callable is granted
                current = [] if not args.revoke else [
                    name for name, tool in registry.CALLABLES.items() if tool.user_configurable]
            if isinstance(before.get("tools"), list) or args.revoke:
                changes["tools"] = _with(current, args.grant or [], args.revoke or [])
        if args.identity or args.remove_identity:
            add = [await _identity_name(client, i) for i in args.identity or ()]
            remove = [await _identity_name(client, i) for i in args.remove_identity or ()]
            keys = _with(list(before.get("signingKeys") or []), add, remove)
            changes["signingKeys"] = keys
            signing = before.get("signingKey")
            if add:
                changes["signingKey"] = add[-1]   # the one named last signs from now on
            elif signing in remove:
                changes["signingKey"] = keys[0] if keys else None
        if not changes:
            raise CliError("nothing to change: give at least one flag (`seed-agents agents update --help`)", code=2)
        after = (await client.update_agent(agent, merged_definition(before, changes)))["agent"]["definition"]
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if not changed:
        say(f"agent {agent}: nothing changed (the definition already had these values)")
        return 0
    print(f"agent {agent}:")
    for key in changed:
        print(f"  {key}: {_shown(before[key]) if key in before else '(none)'} → "
              f"{_shown(after[key]) if key in after else '(none)'}")
    return 0


async def delete(args) -> int:
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent_id)
        await client.delete_agent(agent)
    print(f"deleted agent {agent}")
    return 0


def register(sub, common) -> None:
    agents = sub.add_parser("agents", help="create and list agents",
                            description="Create and list the agents of your account.")
    asub = agents.add_subparsers(dest="agents_command", metavar="{create,list,show,update,delete}", required=True)
    p = asub.add_parser("create", parents=[common], help="create an agent and print its id",
                        description="Create an agent and print its id. Without --model it uses the "
                                    "model its provider was set with (`providers set NAME --model M`).")
    p.add_argument("--name", required=True, help="a name for people (commands take it for the id)")
    p.add_argument("--system-prompt", default="", help="the system prompt (default empty)")
    p.add_argument("--provider", default="echo",
                   help="a model provider of the account, or the built-in echo (default)")
    p.add_argument("--model", default=None, help="model name (default: the one the provider was "
                   "set with, `providers set NAME --model M`; echo for the echo provider)")
    p.add_argument("--no-identity", action="store_true",
                   help="do not make the agent a Seed account of its own (a signing identity) first")
    p.set_defaults(run=create)
    p = asub.add_parser("list", parents=[common], help="list agents, newest update first",
                        description="List your agents: id, name, status, provider/model, last update.")
    p.add_argument("--json", action="store_true", help="print the agents as JSON, as the server gave them")
    p.set_defaults(run=list_)
    p = asub.add_parser("show", parents=[common], help="an agent's definition, field by field",
                        description="Show an agent: id, status, and each field of its definition.")
    p.add_argument("agent_id", metavar="AGENT", help="the agent's name, id, or the start of its id")
    p.add_argument("--json", action="store_true", help="print the agent as JSON, as the server gave it")
    p.set_defaults(run=show)
    p = asub.add_parser("update", parents=[common], help="change any field of an agent's definition",
                        description="Change an agent's definition: the flags given are applied to the "
                                    "stored definition (the rest stays as it is), and each field that "
                                    "changed is shown before and after.")
    p.add_argument("agent_id", metavar="AGENT", help="the agent's name, id, or the start of its id")
    p.add_argument("--name", default=None, help="a new name")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--system-prompt", default=None, metavar="TEXT", help="a new system prompt")
    prompt.add_argument("--system-prompt-file", default=None, metavar="FILE",
                        help="a new system prompt read from FILE (- for stdin)")
    p.add_argument("--provider", default=None, help="another model provider (its stored model too, "
                   "unless --model)")
    p.add_argument("--model", default=None, help="another model")
    p.add_argument("--reasoning", default=None, metavar="LEVEL",
                   help="the reasoning level (as the provider's models take it), or off")
    p.add_argument("--add-mcp", action="append", metavar="SERVER", help="let it use this MCP server "
                   "(`seed-agents mcp ls`; repeatable)")
    p.add_argument("--remove-mcp", action="append", metavar="SERVER", help="take an MCP server away (repeatable)")
    p.add_argument("--identity", action="append", metavar="IDENTITY",
                   help="let it sign as this identity (name, label or account id; `seed-agents identities "
                        "list`), and sign as it from now on (repeatable: the last one signs)")
    p.add_argument("--remove-identity", action="append", metavar="IDENTITY",
                   help="stop it signing as this identity (repeatable)")
    p.add_argument("--grant", action="append", metavar="TOOL",
                   help="grant a tool (its definition's `tools`: e.g. web_search, navigate; repeatable)")
    p.add_argument("--revoke", action="append", metavar="TOOL", help="take a granted tool away (repeatable)")
    p.add_argument("--set", action="append", metavar="FIELD=JSON",
                   help="set any definition field to a JSON value (e.g. --set 'enabledModels=[]')")
    p.add_argument("--unset", action="append", metavar="FIELD", help="remove a definition field")
    p.set_defaults(run=update)
    p = asub.add_parser("delete", parents=[common], help="delete an agent with its sessions and runs",
                        description="Delete an agent, its sessions, their events and its runs.")
    p.add_argument("agent_id", metavar="AGENT", help="the agent's name, id, or the start of its id")
    p.set_defaults(run=delete)

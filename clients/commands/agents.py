"""`agents create`, `agents list` and `agents delete`."""
from __future__ import annotations

import contextlib
import uuid

from ..errors import AgentsError
from ..render import when
from .common import open_client, print_listing
from .resolve import agent_id, all_agents, provider_model


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


async def delete(args) -> int:
    async with open_client(args) as client:
        agent = await agent_id(client, args.agent_id)
        await client.delete_agent(agent)
    print(f"deleted agent {agent}")
    return 0


def register(sub, common) -> None:
    agents = sub.add_parser("agents", help="create and list agents",
                            description="Create and list the agents of your account.")
    asub = agents.add_subparsers(dest="agents_command", metavar="{create,list,delete}", required=True)
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
    p = asub.add_parser("delete", parents=[common], help="delete an agent with its sessions and runs",
                        description="Delete an agent, its sessions, their events and its runs.")
    p.add_argument("agent_id", metavar="AGENT", help="the agent's name, id, or the start of its id")
    p.set_defaults(run=delete)

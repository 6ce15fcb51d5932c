"""Names and id prefixes wherever a command asks for an id.

A person types what they see in a listing: an agent's name, a session's title, or the first
characters of an id. `agent_id` and `session_id` turn that into the full id: a whole id is used
as it is (the server answers 404 if it is not yours); otherwise an exact name (or title) wins,
then a unique id prefix. Nothing matching, or several matching, is one sentence that lists the
candidates and the command that shows them all. Any command that takes an id uses these.
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from .common import CliError

FULL_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
SHOWN_CANDIDATES = 8
SHORT_ID = 8   # characters of an id the listings show first


def short(id_: str) -> str:
    return id_[:SHORT_ID]


async def all_agents(client) -> list[dict]:
    """Every agent the account sees, all pages."""
    agents: list[dict] = []
    cursor = None
    while True:
        action = {"_": "ListAgents"}
        if cursor:
            action["cursor"] = cursor   # passed back exactly as it came
        response = await client.call(action)
        agents += response.get("agents", [])
        cursor = response.get("nextCursor")
        if not cursor:
            return agents


async def all_sessions(client, agent_id: str | None = None, top_level: bool = False) -> tuple[list[dict], dict]:
    """Every session (of `agent_id` when given), all pages, and the agents they belong to by id
    (ListSessions answers them alongside: their names for the listings)."""
    sessions: list[dict] = []
    agents: dict[str, dict] = {}
    cursor = None
    while True:
        response = await client.list_sessions(agent_id=agent_id, cursor=cursor,
                                              include_children=False if top_level else None)
        sessions += response.get("sessions", [])
        agents.update((a["id"], a) for a in response.get("agents", []) if "id" in a)
        cursor = response.get("nextCursor")
        if not cursor:
            return sessions, agents


def agent_name(agent: dict | None) -> str:
    return str(((agent or {}).get("definition") or {}).get("name", ""))


def pick(kind: str, wanted: str, items: list[dict], name_of: Callable[[dict], str], listing: str) -> str:
    """The id of the one item `wanted` names (exact name first, then id prefix), or CliError."""
    exact = [i for i in items if i.get("id") == wanted]
    if exact:
        return wanted
    named = [i for i in items if name_of(i) == wanted]
    found = named or [i for i in items if str(i.get("id", "")).startswith(wanted.lower())]
    if len(found) == 1:
        return found[0]["id"]
    if not found:
        raise CliError(f"no {kind} is named {wanted!r} or has an id starting with it; "
                       f"`{listing}` shows yours")
    shown = ", ".join(f"{short(i['id'])} ({name_of(i) or 'no name'})" for i in found[:SHOWN_CANDIDATES])
    more = f" and {len(found) - SHOWN_CANDIDATES} more" if len(found) > SHOWN_CANDIDATES else ""
    raise CliError(f"{wanted!r} matches {len(found)} {kind}s: {shown}{more}; give more of the id")


async def agent_id(client, wanted: str) -> str:
    """An agent by id, unique id prefix, or name."""
    if FULL_ID.match(wanted):
        return wanted
    return pick("agent", wanted, await all_agents(client), agent_name, "seed-agents agents list")


async def session_id(client, wanted: str) -> str:
    """A session by id, unique id prefix, or title."""
    if FULL_ID.match(wanted):
        return wanted
    sessions, _ = await all_sessions(client)
    return pick("session", wanted, sessions, lambda s: str(s.get("title", "")), "seed-agents sessions list")


async def run_id(client, wanted: str, runs: Callable[[], Awaitable[list[dict]]]) -> str:
    """A run by id or unique id prefix, among `runs()` (read only when a prefix is given)."""
    if FULL_ID.match(wanted):
        return wanted
    return pick("run", wanted, await runs(), lambda r: "", "seed-agents runs list")


async def session_arg(args, name: str = "session") -> str:
    """`args.<name>` as a full session id, asking the server only when it is not one already
    (for a command that then opens its own client with the id)."""
    from .common import open_client

    wanted = getattr(args, name)
    if FULL_ID.match(wanted):
        return wanted
    async with open_client(args) as client:
        return await session_id(client, wanted)


async def provider_model(args, provider: str) -> str:
    """The model `providers set NAME --model M` stored with `provider` (echo: echo)."""
    from .common import open_client

    async with open_client(args) as client:
        listed = (await client.list_model_providers()).get("providers", [])
    entry = next((p for p in listed if p.get("name") == provider), None)
    if entry is None:
        raise CliError(f"you have no provider {provider!r}: add it with `seed-agents providers set "
                       f"{provider} --type TYPE --model MODEL` (`seed-agents providers list` shows yours)")
    if not entry.get("defaultModel"):
        raise CliError(f"the provider {provider!r} has no model of its own: give --model, or store "
                       f"one with `seed-agents providers set {provider} ... --model MODEL`")
    return entry["defaultModel"]

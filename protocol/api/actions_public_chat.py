"""Public chat (ours; the storage design's `public_chat`, which the reference has not built):
`SetAgentPublicChat {agentId, publicChat, limits?, tools?}`, the owner opening an agent to every
signed account (docs/protocol.md, "Public chat").

`limits` bounds what each visitor, and all of them together, may cost the owner: messages per
visitor per clock hour, tokens per visitor per UTC day, tokens of all visitors per UTC day.
`tools` names the callable tools the owner grants visitors: the registry's network tools and the
agent's MCP tools. Never `execute`, an authored tool (code run with the agent's files),
`search_memory` (the owner's memory) or `wait`: those are refused here by name, and an authored
tool's name is refused when a turn would call it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .fields import MAX_ID, ActionKind, Fields, check_integer, check_text, kind_of, write

DEFAULT_LIMITS = {"messagesPerHour": 20, "tokensPerDay": 50_000, "tokensPerDayAll": 500_000}
LIMIT_BOUNDS = {"messagesPerHour": 10_000, "tokensPerDay": 10**9, "tokensPerDayAll": 10**10}
MAX_TOOLS = 64
MAX_TOOL_NAME = 128
# Callables that reach the owner's files, memory or sandbox, or park a run: never a visitor's.
NOT_GRANTABLE = frozenset({"execute", "search_memory", "wait"})


@dataclass(frozen=True)
class SetAgentPublicChat:
    ts: int
    agent_id: str
    public_chat: bool
    limits: dict          # every key of DEFAULT_LIMITS (the defaults filled in)
    tools: tuple[str, ...]

    def settings(self) -> dict | None:
        """What agents.public_chat stores (None: closed)."""
        return {**self.limits, "tools": list(self.tools)} if self.public_chat else None


def _limits(f: Fields) -> dict:
    given = f.mapping("limits", required=False) or {}
    unknown = sorted(set(given) - set(DEFAULT_LIMITS), key=str)
    if unknown:
        raise f.fail("limits", f"has unknown field {str(unknown[0])[:40]!r}; it takes "
                               f"{', '.join(DEFAULT_LIMITS)}")
    out = {}
    for name, default in DEFAULT_LIMITS.items():
        value = given.get(name, default)
        out[name] = check_integer(value, 1, LIMIT_BOUNDS[name], lambda p, n=name: f.fail(f"limits.{n}", p))
    return out


def _tools(f: Fields) -> tuple[str, ...]:
    value = f.get("tools", False)
    if value is None:
        return ()
    if type(value) is not list:
        raise f.fail("tools", f"must be a list of tool names, got {kind_of(value)}")
    if len(value) > MAX_TOOLS:
        raise f.fail("tools", f"must name at most {MAX_TOOLS} tools, got {len(value)}")
    names: list[str] = []
    for n, item in enumerate(value):
        name = check_text(item, MAX_TOOL_NAME, False, lambda p, n=n: f.fail(f"tools[{n}]", p)).strip()
        if name in NOT_GRANTABLE:
            raise f.fail(f"tools[{n}]", f"{name} cannot be granted to visitors: it reaches the owner's "
                                        "files, memory or sandbox")
        if name not in names:
            names.append(name)
    return tuple(names)


def _set_public_chat(f: Fields, ts: int) -> SetAgentPublicChat:
    agent_id = f.text("agentId", MAX_ID)
    value = f.get("publicChat", True)
    if type(value) is not bool:
        raise f.fail("publicChat", f"must be a boolean, got {kind_of(value)}")
    return SetAgentPublicChat(ts, agent_id, value, _limits(f), _tools(f))


ACTIONS: dict[str, ActionKind] = {
    "SetAgentPublicChat": write(_set_public_chat),
}

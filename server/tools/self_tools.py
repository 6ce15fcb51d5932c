"""What the agent can learn about itself: `~/self` (its definition) and `~/tools` (the tools it
can use, and each one's contract)."""
from __future__ import annotations

from seed_agents.protocol.agent import tool_registry as registry

from .context import ToolContext, ToolResult

# The definition keys ~/self shows (secrets never live in a definition; this keeps it short).
_SELF_KEYS = ("name", "description", "model", "modelProvider", "systemPrompt", "tools", "signingKey",
              "signingKeys", "reasoningLevel")


def tools_listing(ctx: ToolContext, verbs: tuple[str, ...], summary: str | None = None) -> dict:
    lines = ["# ~/tools", "", "## Verbs (always available)"]
    lines += [f"- {registry.summary_line(registry.VERBS[v])}" for v in verbs]
    lines += ["", "## Callable with the call verb"]
    lines += [f"- {registry.summary_line(registry.CALLABLES[c])}" for c in ctx.callables]
    return {"summary": summary or f"{len(verbs)} verbs and {len(ctx.callables)} callable tools.",
            "markdown": "\n".join(lines), "tools": list(ctx.callables)}


def read_tools(ctx: ToolContext, name: str, verbs: tuple[str, ...], tools: dict | None = None) -> ToolResult:
    """`tools`: this server's own form of a registry tool (execute's runtimes), by name."""
    if not name:
        return ToolResult(tools_listing(ctx, verbs))
    tool = (tools or {}).get(name) or registry.get_tool(name)
    if tool is None or (tool.name not in verbs and tool.name not in ctx.callables):
        return ToolResult(tools_listing(ctx, verbs, f"No tool named {name}."))
    return ToolResult({"summary": f"Contract for {tool.name}.", "name": tool.name,
                       "markdown": registry.contract_markdown(tool)})


def read_self(ctx: ToolContext, verbs: tuple[str, ...]) -> ToolResult:
    definition = ctx.agent.get("definition") or {}
    shown = {k: definition[k] for k in _SELF_KEYS if k in definition}
    return ToolResult({"summary": f"You are {definition.get('name') or 'an agent'} ({ctx.agent['id']}).",
                       "agentId": ctx.agent["id"], "definition": shown,
                       "tools": {"verbs": list(verbs), "callable": list(ctx.callables)}})

"""The tools an agent holds beyond the registry, reached through the `call` verb: its remote MCP
tools (`<server>__<tool>`, picked by `definition.mcpServers`) and its authored lambdas.

An MCP call's input is checked against the tool's schema, then it runs under the provider network
policy and --mcp-timeout (server/mcp/calls.py); its result is data for the model. A lambda is
stored but never runs here: calling one answers that this server has no code sandbox (health says
`codeExec: false`). A disabled document is not offered.
"""
from __future__ import annotations

from seed_agents.protocol.tool_documents import BUILTINS, summary_from_description

from ..mcp.calls import call_mcp_tool
from ..operations.health import CODE_EXEC_REASON
from ..store import tool_documents as tools_q
from .context import ToolFailure, ToolResult

EXECUTE = "execute"   # the registry's code-sandbox callable


def granted(definition: dict, doc: dict) -> bool:
    """Do the agent's grants offer this tool? A user-configurable callable of the registry when
    `definition.tools` names it (or there is no list); anything else always. `execute` never: the
    reference grants it only where code can run (enabledCallableTools), and this server has no
    sandbox (health: codeExec false), so the desktop's tools tab must not show it as on."""
    if doc["kind"] == "builtin" and doc["name"] == EXECUTE:
        return False
    tool = BUILTINS.get(doc["name"]) if doc["kind"] == "builtin" else None
    if tool is None or not tool.user_configurable:
        return True
    grants = definition.get("tools")
    return type(grants) is not list or doc["name"] in grants


class AgentTools:
    def __init__(self, db, box, config, account_id: str, agent_id: str, rows: list[dict]) -> None:  # noqa: ANN001
        self.db, self.box, self.config = db, box, config
        self.account_id, self.agent_id = account_id, agent_id
        self.docs = {r["doc"]["name"]: r["doc"] for r in rows
                     if r["enabled"] and r["doc"]["kind"] in ("mcp", "lambda")}

    def has(self, name: str) -> bool:
        return name in self.docs

    def guide_lines(self) -> list[str]:
        return [f"- {name} — {summary_from_description(doc.get('summary') or doc['description'])}"
                for name, doc in sorted(self.docs.items())]

    async def call(self, name: str, value) -> ToolResult:  # noqa: ANN001
        doc = self.docs[name]
        if doc["kind"] == "lambda":
            raise ToolFailure(f"{name} is an authored (lambda) tool, which is stored but cannot run: "
                              f"{CODE_EXEC_REASON.lower()} (health: codeExec false)")
        output, error = await call_mcp_tool(self.db, self.box, self.config, self.account_id, self.agent_id, name,
                                            {} if value is None else value)
        if error is not None:
            raise ToolFailure(error)
        return ToolResult(output)


async def documents(db, agent: dict, now: int) -> list[dict]:  # noqa: ANN001
    """The agent's tool documents, brought up to date (builtins, MCP projections) when a CID
    changed, at run start as the reference syncs them: the turn goes on with them at once, and the
    write is queued without being waited for."""
    rows = db.read(tools_q.list_documents, agent["account"], agent["id"])
    current, changed = db.read(tools_q.refreshed, agent, rows, now)
    if changed:
        db.write_nowait(tools_q.refresh, agent, now)
    return current


def offered(agent: dict, rows: list[dict], available: tuple[str, ...]) -> tuple[str, ...]:
    """The registry's callables this server has that the agent holds enabled and granted."""
    state = {r["doc"]["name"]: r for r in rows}
    out = []
    for name in available:
        row = state.get(name)
        if row is not None and not row["enabled"]:
            continue
        if not granted(agent["definition"], row["doc"] if row else {"kind": "builtin", "name": name}):
            continue
        out.append(name)
    return tuple(out)

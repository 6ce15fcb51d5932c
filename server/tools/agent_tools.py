"""The tools an agent holds beyond the registry, reached through the `call` verb: its remote MCP
tools (`<server>__<tool>`, picked by `definition.mcpServers`) and its authored lambdas.

An MCP call's input is checked against the tool's schema, then it runs under the provider network
policy and --mcp-timeout (server/mcp/calls.py); its result is data for the model. A lambda runs
in the code sandbox (server/tools/code_tools.py) when this server offers its runtime and the agent
holds the `execute` grant. The agent writes its own lambdas with `write ~/tools/<name>` and may
call them in the same turn. A disabled document is not offered.
"""
from __future__ import annotations

import json

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.agent.lambda_abi import document_contract
from seed_agents.protocol.agent.tool_documents import BUILTINS, lambda_document, summary_from_description

from ..mcp.calls import call_mcp_tool
from ..store import tool_documents as tools_q
from ..store.errors import Refused
from . import code_tools
from .context import ToolContext, ToolFailure, ToolResult

EXECUTE = "execute"   # the registry's code-sandbox callable


def granted(definition: dict, doc: dict, code_exec: bool = False) -> bool:
    """Do the agent's grants offer this tool? A user-configurable callable of the registry when
    `definition.tools` names it (or there is no list); anything else always. `execute` only where
    code can run (`code_exec`: the sandbox passed its self-check), as the reference's
    enabledCallableTools, so the desktop's tools tab never shows it on where it cannot run."""
    if doc["kind"] == "builtin" and doc["name"] == EXECUTE and not code_exec:
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

    async def call(self, name: str, value, ctx: ToolContext | None = None, call_id: str = "") -> ToolResult:  # noqa: ANN001
        doc = self.docs[name]
        if doc["kind"] == "lambda":
            if ctx is None or ctx.code is None:
                raise ToolFailure(f"{name} is an authored (lambda) tool, and code execution is not available "
                                  "here (health: codeExec false)")
            return await code_tools.run_lambda(ctx, doc, value, call_id)
        output, error = await call_mcp_tool(self.db, self.box, self.config, self.account_id, self.agent_id, name,
                                            {} if value is None else value)
        if error is not None:
            raise ToolFailure(error)
        return ToolResult(output)


    def contract(self, ctx: ToolContext, name: str) -> ToolResult | None:
        """A read of ~/tools/<name> for one of the agent's own tools (None: not one of them)."""
        row = ctx.db.read(tools_q.get_document, self.account_id, self.agent_id, name)
        if row is None or row["doc"]["kind"] == "builtin":
            return None
        return ToolResult({"summary": f"Contract for {name} ({row['cid']}).", "name": name, "cid": row["cid"],
                           "kind": row["doc"]["kind"], "markdown": document_contract(row["doc"], row["cid"])})

    async def write(self, ctx: ToolContext, name: str, params: dict) -> ToolResult:
        """`write ~/tools/<name>`: JSON content {description, input, output?, source, runtime?}
        saves (or replaces) the agent's own lambda, callable at once; `options.delete` removes it."""
        options = params.get("options") if isinstance(params.get("options"), dict) else {}
        unknown = set(options) - {"delete", "tool"}
        if unknown:
            raise ToolFailure(f"unknown option(s) for a tool write: {', '.join(sorted(unknown))}")
        account, agent_id, now = self.account_id, self.agent_id, ctx.now_ms()
        try:
            if options.get("delete") is True:
                deleted = await ctx.db.write(lambda conn: tools_q.delete_lambda(conn, account, agent_id, name))
                self.docs.pop(name, None)
                ctx.publisher.notify_account(account, "agent-updated", agent_id=agent_id)
                return ToolResult({"summary": f"Deleted tool {name}." if deleted else f"No tool named {name}.",
                                   "name": name, "deleted": deleted})
            if isinstance(params.get("content"), str):
                try:
                    parsed = json.loads(params["content"])
                except ValueError:
                    raise ToolFailure("write ~/tools/<name> expects JSON content: "
                                      "{description, input, output?, source, runtime?}") from None
            else:
                parsed = options.get("tool")
            doc = lambda_document({**(parsed if isinstance(parsed, dict) else {}), "name": name}, "tool")

            def job(conn):
                existing = tools_q.get_document(conn, account, agent_id, name)
                previous = name if existing is not None and existing["doc"]["kind"] == "lambda" else None
                return tools_q.save_lambda(conn, account, agent_id, doc, None, previous, now)

            row = await ctx.db.write(job)
        except (ProtocolError, Refused) as exc:
            raise ToolFailure(exc.message) from None
        if row["enabled"]:
            self.docs[name] = row["doc"]
        ctx.publisher.notify_account(account, "agent-updated", agent_id=agent_id)
        return ToolResult({"summary": f"Saved tool {name} ({row['cid']}). Call it by name with the call verb; "
                                      "its contract is live in ~/tools now.",
                           "name": name, "cid": row["cid"], "kind": "lambda"})


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
    """The registry's callables this server has (`execute` among them only where code runs)
    that the agent holds enabled and granted."""
    state = {r["doc"]["name"]: r for r in rows}
    out = []
    for name in available:
        row = state.get(name)
        if row is not None and not row["enabled"]:
            continue
        if not granted(agent["definition"], row["doc"] if row else {"kind": "builtin", "name": name}, True):
            continue
        out.append(name)
    return tuple(out)

"""Building a tool context: the one place every entry point that runs a tool goes through (issue
33: "build a tool context" written once).

- the model's turn (`model`), and a delegated child's (`child`, narrowed to the tools its spawner
  named, with delegation's verbs): server/runtime/runner.py;
- a person's `InvokeSessionTool` (`user`, as that person with their role on the agent):
  server/handlers/session_tools.py;
- a trigger's `tool` continuation (`trigger`, as the trigger's agent): server/triggers/tool_run.py;
- a workflow's `ctx.call` (`workflow`, as its agent, narrowed like any child to the tools its
  spawner named, without delegation's verbs: ctx.delegate is its way to children):
  server/runtime/workflows.py.

Each gets the same ways out (the store, the publisher, the web access, the HM client, the secrets
box, the server's bounds), the agent's grants (its enabled tool documents, its MCP tools) and an
explicit `Authority` (server/tools/authority.py) that every address form asks.
"""
from __future__ import annotations

from dataclasses import dataclass

from seed_agents.protocol.agent import thoroughness

from ..store import delegation as delegation_q
from ..store import roles as roles_q
from ..store import sessions as sessions_q
from ..tools import agent_tools
from ..tools.authority import Authority
from ..tools.context import ToolContext
from ..tools.delegation_tools import Delegating
from ..tools.surface import OFFERED_VERBS, ToolSurface, offered_callables
from . import turns


@dataclass(frozen=True)
class Entry:
    """Where a tool call entered: `via`, and for a person their account and role on the agent."""

    via: str                      # model | user | trigger | child | workflow
    account: str | None = None    # the person (via user)
    role: str | None = None       # their role on the agent (via user)

    @classmethod
    def person(cls, account: str, role: str) -> "Entry":
        return cls("user", account, role)


async def build_surface(runtime, entry: Entry, agent: dict, session_id: str, run: dict | None = None,  # noqa: ANN001
                        history=None, run_id: str = "", visitor_tools: list | None = None) -> ToolSurface:  # noqa: ANN001
    """The tool surface of one entry: `run` is the turn's run (model, child), else None and
    `run_id` names what the calls belong to (a trigger's firing); `history` gives a typed
    child's earlier turns (to restore a result it delivered). `visitor_tools`: a visitor's
    session (public chat), offered `call` with the tools its owner granted visitors and nothing
    else (no memory, no writes, no delegation, no plan)."""
    db, config = runtime.db, runtime.config
    rows = await agent_tools.documents(db, agent, runtime.now_ms())
    await runtime.sandbox_checked()   # (right after a start: whether `execute` is offered is known)
    callables = agent_tools.offered(agent, rows, offered_callables(bool(config.searxng_url), runtime.code is not None))
    verbs: tuple[str, ...] = OFFERED_VERBS
    delegating = None
    via = entry.via
    if run is not None and via in ("model", "child"):
        spec = db.read(delegation_q.child_input, run["id"]) if "parentRunId" in run else None
        if "parentRunId" in run:
            via = "child"
        if spec and type(spec.get("tools")) is list:   # a child narrowed by its spawner
            callables = tuple(c for c in callables if c in spec["tools"])
        schema = spec.get("output") if spec else None
        preset = thoroughness.preset(db.read(sessions_q.thoroughness_of_tree, run["id"]))   # the session's
        delegating = Delegating(run["depth"], db.read(delegation_q.child_count, run["sessionId"]), schema, preset)
        if schema is not None and history is not None:   # taken up again: a result it delivered stands
            delegating.restore(history().entries, run["id"])
        verbs = (*OFFERED_VERBS, "delegate", *(("return_result",) if schema is not None else ()),
                 *(("continue_session",) if via == "model" else ()))   # (a top-level conversation's)
    elif run is not None and via == "workflow":
        spec = db.read(delegation_q.child_input, run["id"]) or {}
        if type(spec.get("tools")) is list:   # narrowed by its spawner, as a child is
            callables = tuple(c for c in callables if c in spec["tools"])
    if visitor_tools is not None:
        return _visitor_surface(runtime, agent, session_id, run, callables, rows, visitor_tools)
    shared = db.read(roles_q.is_shared, agent["id"])
    if via == "user":
        authority = Authority.of_person(entry.account, entry.role, agent, callables, shared)
    else:
        authority = Authority.of_agent(agent, via, callables, shared)
    docs = agent_tools.AgentTools(db, runtime.box, config, agent["account"], agent["id"], rows)
    ctx = ToolContext(db, runtime.publisher, runtime.now_ms, agent["account"], agent, session_id,
                      run["id"] if run is not None else run_id, web=runtime.web, hm=runtime.hm, box=runtime.box,
                      callables=callables, authority=authority, config=config, code=runtime.code,
                      started=lambda effects: turns.publish(runtime.publisher, runtime.kick, effects),
                      triggers=runtime.trigger_admin)
    return ToolSurface(ctx, verbs, delegating, docs)


def _visitor_surface(runtime, agent: dict, session_id: str, run: dict, callables: tuple[str, ...],  # noqa: ANN001
                     rows: list[dict], granted: list) -> ToolSurface:
    """A visitor's turn: the agent acting as itself (its grants, its owner's account), narrowed to
    the callables and MCP tools the owner granted visitors; authored tools (code run with the
    agent's files) never."""
    allowed = set(granted)
    callables = tuple(c for c in callables if c in allowed)
    rows = [r for r in rows if r["doc"]["name"] in allowed and r["doc"]["kind"] == "mcp"]
    authority = Authority.of_agent(agent, "model", callables, True)
    docs = agent_tools.AgentTools(runtime.db, runtime.box, runtime.config, agent["account"], agent["id"], rows)
    ctx = ToolContext(runtime.db, runtime.publisher, runtime.now_ms, agent["account"], agent, session_id, run["id"],
                      web=runtime.web, hm=runtime.hm, box=runtime.box, callables=callables, authority=authority,
                      config=runtime.config, code=None, started=lambda effects: None, triggers=None)
    verbs = ("call",) if callables or docs.docs else ()
    return ToolSurface(ctx, verbs, None, docs, visitor=True)

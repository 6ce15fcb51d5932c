"""One turn's tool surface: which verbs the model is offered, and running one call.

A call is checked against its tool's declaration (protocol/agent/tool_registry.py) before anything
runs. A call the model got wrong (an unknown tool, arguments that are not JSON, input that does
not match the schema) is answered with the tool's contract or the listing, as the reference
does ("touch-expand"), so the model can correct itself; it never ends the run. The verbs' address
forms (`ADDRESS_FORMS`) and the callables of `call` (`CALLABLE_TOOLS`) are tables here, each row
naming the adapter that hands the work to its group's module: a new form or tool is one row. A
form whose part lands later answers "not available on this server yet".

`SIDE_EFFECTS` names the verbs whose effect must never happen twice for one recorded call: after
a crash between such a call and its result, the call is answered as interrupted, not run again;
`side_effects` adds the `call`s of anything but the read-only callables (code in the sandbox
commits memory; an MCP or authored tool may act anywhere).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seed_agents.protocol.agent import tool_registry as registry

from ..providers.base import MAX_TOOL_ARGUMENT_CHARS, ToolCall, ToolSpec
from . import (agent_tools, code_tools, continuation_tools, delegation_tools, hm_tools, memory_tools, self_tools,
               session_tools, trigger_tools)
from .authority import OWNER, READER, WRITER
from .context import ToolContext, ToolFailure, ToolResult

# The verbs offered to the model on this server (delegate and return_result come with
# delegation; until then they are neither offered nor listed).
OFFERED_VERBS = ("read", "write", "call", "plan", "status")
SIDE_EFFECTS = frozenset({"write"})
# The role on the agent each verb needs (server/tools/authority.py): a person's own role, the
# agent itself always `owner`. A reader reads and changes nothing.
VERB_NEEDS = {"read": READER, "write": WRITER, "call": WRITER, "plan": WRITER, "status": WRITER,
              "delegate": OWNER, "return_result": OWNER, "continue_session": OWNER}
# The verbs a model turn gets by the kind of its session, besides OFFERED_VERBS (tool_context.py):
# delegate in every model turn (return_result in a typed child's), continue_session in a top-level
# conversation's only. A call of one where it is not offered is answered why.
TURN_VERBS = ("delegate", "continue_session")
NOT_OFFERED = {"continue_session": "continue_session is not offered here: only a conversation's own turn "
                                   "continues it (a delegated task reports back to its parent)"}
NOT_YET = "is not available on this server yet"


def side_effects(name: str, arguments: str) -> bool:
    """Must this recorded call never run twice (after a crash: answered as interrupted)?"""
    if name in SIDE_EFFECTS:
        return True
    if name != "call":
        return False
    try:
        tool = json.loads(arguments).get("tool")
    except (ValueError, AttributeError):
        return False
    return isinstance(tool, str) and registry.normalize_name(tool.strip()) not in READ_ONLY_CALLABLES


def offered_callables(web_search: bool, code_exec: bool = False) -> tuple[str, ...]:
    """The callables of CALLABLE_TOOLS this server offers, in the table's order: each row's
    `offered_if` names the capability it needs (a search engine, a code sandbox)."""
    has = {None: True, "web_search": web_search, "code_exec": code_exec}
    return tuple(t.name for t in CALLABLE_TOOLS.values() if not t.own and has[t.offered_if])


def provider_tools(verbs: tuple[str, ...] = OFFERED_VERBS, callables: tuple[str, ...] = (),
                   own: Sequence[str] = (), tools: dict | None = None) -> tuple[ToolSpec, ...]:
    """The verbs as the model is offered them. `call` says which tools it reaches, one summary
    line each: the registry's callables, then the agent's own tools (`own`, its MCP and authored
    tools' lines). The reference lists them in the model's context; here they travel with the
    tool that uses them, so the agent's system prompt stays exactly the agent's."""
    out = []
    for verb in verbs:
        name, description, parameters = registry.provider_tool(registry.VERBS[verb])
        if verb == "delegate":   # only the modes this server runs
            name, description, parameters = delegation_tools.offered(name, description, parameters)
        if verb == "call" and callables:
            description += "\n\nCallable tools:\n" + "\n".join(
                f"- {registry.summary_line((tools or registry.CALLABLES).get(c) or registry.CALLABLES[c])}"
                for c in callables)
        if verb == "call" and own:
            description += "\n\nYour own tools, also through `call`:\n" + "\n".join(own)
        out.append(ToolSpec(name, description, parameters))
    return tuple(out)


def parse_arguments(call: ToolCall) -> tuple[dict | None, str | None]:
    """(input, None) or (None, what is wrong with the call's arguments)."""
    if call.oversize:
        return None, f"the arguments were larger than {MAX_TOOL_ARGUMENT_CHARS} characters"
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return None, "the arguments were not valid JSON (cut off, or malformed)"
    if not isinstance(value, dict):
        return None, "the arguments must be a JSON object"
    return value, None


class ToolSurface:
    def __init__(self, ctx: ToolContext, verbs: tuple[str, ...] = OFFERED_VERBS,
                 delegating: delegation_tools.Delegating | None = None,
                 agent_docs: agent_tools.AgentTools | None = None, visitor: bool = False) -> None:
        self.ctx = ctx
        self.verbs = verbs
        self.visitor = visitor         # a visitor's session: the owner's grants to visitors alone (public chat)
        self.delegating = delegating   # delegate / return_result state (server/tools/delegation_tools.py)
        self.agent_docs = agent_docs   # the agent's MCP and authored tools (server/tools/agent_tools.py)

    @property
    def finished(self) -> bool:
        """A typed child delivered its result (or may no more): its turn ends now."""
        return self.delegating is not None and self.delegating.finished

    def provider_tools(self) -> tuple[ToolSpec, ...]:
        own = list(self.agent_docs.guide_lines()) if self.agent_docs is not None else []
        if not self.visitor:   # (the owner's memory is never a visitor's)
            own.append("- " + memory_tools.SEARCH_MEMORY_DESCRIPTION)
        if self.delegating is not None:   # this server's own callable: park until a signal
            own.append("- " + delegation_tools.WAIT_DESCRIPTION)
        specs = provider_tools(self.verbs, self.ctx.callables, own, code_tools.server_tools(self.ctx))
        guidance = self.delegating.preset.guidance if self.delegating is not None else None
        if guidance:   # the session's thoroughness, told where delegation is described
            specs = tuple(ToolSpec(t.name, t.description + "\n\n" + guidance, t.parameters)
                          if t.name == "delegate" else t for t in specs)
        if self.delegating is not None and self.delegating.result_schema is not None:
            # return_result's real parameters are the spawner's output schema (the reference swaps
            # them in at session start).
            specs = tuple(ToolSpec(t.name, t.description, self.delegating.result_schema)
                          if t.name == "return_result" else t for t in specs)
        return specs

    async def run(self, call: ToolCall) -> ToolResult:
        tool = registry.VERBS.get(call.name)
        if tool is None or tool.name not in self.verbs:
            if tool is not None and self.visitor:
                return ToolResult(error=f"{tool.name} is not offered here: this is a visitor's conversation "
                                        "(public chat), where only the tools the owner granted visitors run")
            if tool is not None and tool.name in NOT_OFFERED:
                return ToolResult(error=NOT_OFFERED[tool.name])
            if tool is not None:   # a verb of the reference this server has not got yet
                return ToolResult(error=f"{call.name} {NOT_YET}")
            return ToolResult(self_tools.tools_listing(
                self.ctx, self.verbs, f"No tool named {call.name!r}. Here is what you can use."))
        need = VERB_NEEDS.get(tool.name, OWNER)
        if not self.ctx.authority.at_least(need):
            return ToolResult(error=f"{tool.name} needs {need} access to the agent; you have "
                                    f"{self.ctx.authority.role} access")
        params, fault = parse_arguments(call)
        if fault is None:
            errors = registry.input_errors(tool, params)
        else:
            errors = [fault]
        if errors:
            return _contract(tool, errors)
        try:
            if tool.name == "read":
                return await self._read(params)
            if tool.name == "write":
                return await self._write(params)
            if tool.name == "call":
                return await self._call({**params, "__call_id": call.id})
            if tool.name == "delegate" and self.delegating is not None:
                if params.get("await") is False:   # a detached child: started now, the turn goes on
                    return await delegation_tools.detach(self.delegating, self.ctx, call.id, params)
                return delegation_tools.delegate(self.delegating, call.id, params)
            if tool.name == "return_result" and self.delegating is not None:
                return delegation_tools.return_result(self.delegating, params)
            if tool.name == "plan":
                return await session_tools.plan(self.ctx, params)
            if tool.name == "continue_session":
                return await continuation_tools.continue_session(self.ctx, call.id, params)
            return await session_tools.status(self.ctx, params)
        except ToolFailure as exc:
            return ToolResult(error=str(exc))

    # -- verbs -------------------------------------------------------------------------------

    async def _read(self, params: dict) -> ToolResult:
        address = params["address"].strip()
        form = form_of(address)
        if form is None:
            raise ToolFailure(f"Unrecognized address: {address[:200]}. Supported: "
                              f"{', '.join(f.shown for f in ADDRESS_FORMS if f.read is not None)}.")
        return await self._run_form(form, "read", address, params)

    async def _write(self, params: dict) -> ToolResult:
        address = params["address"].strip()
        form = form_of(address)
        if form is None:
            raise ToolFailure(f"Unrecognized address: {address[:200]}. Writable: "
                              f"{', '.join(f.shown for f in ADDRESS_FORMS if f.write is not None)}.")
        return await self._run_form(form, "write", address, params)

    async def _run_form(self, form: "AddressForm", verb: str, address: str, params: dict) -> ToolResult:
        handler = form.read if verb == "read" else form.write
        if handler is None:
            raise ToolFailure(f"{form.name} cannot be {'read' if verb == 'read' else 'written'}; "
                              f"{verb} takes {', '.join(f.shown for f in ADDRESS_FORMS if getattr(f, verb))}")
        need = form.needs(verb)
        authority = self.ctx.authority
        if not authority.at_least(need):
            raise ToolFailure(f"{verb} {form.name} needs {need} access to the agent; you have {authority.role} access")
        if handler is _not_yet:
            raise ToolFailure(f"{'reading' if verb == 'read' else 'writing'} {form.name} {NOT_YET}")
        return await handler(self, address, params)

    async def _call(self, params: dict) -> ToolResult:
        """`call`: this server's own tools (rows marked `own`) first, then the agent's MCP and
        authored tools, then the offered callables of CALLABLE_TOOLS, their input checked
        against the registry's schema before their row runs."""
        name = registry.normalize_name(params["tool"])
        ctx = self.ctx
        if self.visitor and name not in ctx.callables and not (self.agent_docs and self.agent_docs.has(name)):
            raise ToolFailure(f"{name[:100]} is not a tool this agent's owner granted to visitors")
        call_id = params.get("__call_id", "")
        row = CALLABLE_TOOLS.get(name)
        if row is not None and row.own and row.applies(self):
            return await row.run(self, params.get("input"), call_id)
        if self.agent_docs is not None and self.agent_docs.has(name):
            return await self.agent_docs.call(name, params.get("input"), ctx, call_id)
        tool = code_tools.server_tools(ctx).get(name) or registry.CALLABLES.get(name)
        if tool is None or name not in ctx.callables:
            if row is not None and row.unavailable:
                raise ToolFailure(row.unavailable)
            return ToolResult(self_tools.tools_listing(
                ctx, self.verbs, f"No callable tool named {name}. Here is what you can call."))
        tool_input = params.get("input") if isinstance(params.get("input"), dict) else {}
        errors = registry.input_errors(tool, tool_input)
        if errors:
            return _contract(tool, errors)
        if row is None or row.own:
            raise ToolFailure(f"{name} {NOT_YET}")
        return await row.run(self, tool_input, call_id)

    def _web(self):  # noqa: ANN202
        if self.ctx.web is None:
            raise ToolFailure(f"reading the web {NOT_YET}")
        # (charged to whoever the call runs as: a collaborator's reads count against their own share)
        return self.ctx.web.for_account(self.ctx.authority.account)


def _options(params: dict) -> dict:
    return params.get("options") if isinstance(params.get("options"), dict) else {}


def _rest(address: str, prefix: str) -> str:
    return address[len(prefix):].strip()


async def _not_yet(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    """A form whose part lands later (the surface words the answer, knowing the verb)."""
    raise ToolFailure(NOT_YET)


async def _read_memory(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await memory_tools.read(surface.ctx, memory_tools.memory_path_of(address))


async def _write_memory(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await memory_tools.write(surface.ctx, memory_tools.memory_path_of(address), params)


async def _read_attachment(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await memory_tools.read_attachment(surface.ctx, _rest(address, "attachment:"))


async def _read_tools(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    name = address[len("~/tools/"):].strip("/")
    own = surface.agent_docs.contract(surface.ctx, name) if name and surface.agent_docs is not None else None
    return own or self_tools.read_tools(surface.ctx, name, surface.verbs, code_tools.server_tools(surface.ctx))


async def _write_tools(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    name = address[len("~/tools/"):].strip("/")
    if not name or surface.agent_docs is None:
        raise ToolFailure("write ~/tools/<name> (one authored tool by its name)")
    return await surface.agent_docs.write(surface.ctx, name, params)


async def _read_self(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return self_tools.read_self(surface.ctx, surface.verbs)


async def _read_thread(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return session_tools.read_thread(surface.ctx, _rest(address, "thread:"), _options(params))


async def _read_run(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return session_tools.read_run(surface.ctx, _rest(address, "run:"))


async def _read_web(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await surface._web().read_page(address)


async def _read_triggers(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return trigger_tools.read(surface.ctx, address[len("~/triggers"):])


async def _write_triggers(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    if not address.startswith("~/triggers/"):
        raise ToolFailure("write ~/triggers/<name> (one trigger by its name)")
    return await trigger_tools.write(surface.ctx, address[len("~/triggers/"):], params)


async def _read_hm(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await hm_tools.read(surface.ctx, address)


async def _write_hm(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await hm_tools.write(surface.ctx, address, params)


async def _read_ipfs(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await hm_tools.read_ipfs(surface.ctx, address, _options(params))


async def _write_ipfs(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await hm_tools.write_ipfs(surface.ctx, params)


async def _read_activity(surface: ToolSurface, address: str, params: dict) -> ToolResult:
    return await hm_tools.read_activity(surface.ctx, _options(params))


@dataclass(frozen=True)
class AddressForm:
    """One address form of `read` and `write`: what it starts with, who runs it, and the role on
    the agent a call needs for each verb (the agent itself holds `owner`; a person holds their
    own role, server/tools/authority.py). A handler checks, besides, what its item needs (a
    thread the caller may read, a publication the owner allowed)."""

    name: str                               # as messages and the access matrix name it
    starts: tuple[str, ...]                 # an address starting with one of these ...
    bare: tuple[str, ...] = ()              # ... or equal to one of these
    read: Callable | None = None            # async (surface, address, params) -> ToolResult
    write: Callable | None = None
    read_needs: str = READER
    write_needs: str = WRITER
    example: str = ""

    @property
    def shown(self) -> str:
        return self.example or self.starts[0]

    def matches(self, address: str) -> bool:
        return address in self.bare or address.startswith(self.starts)

    def needs(self, verb: str) -> str:
        return self.read_needs if verb == "read" else self.write_needs


# Every address form of `read` and `write` (issue 33: extension points as tables). A new form is
# one row here, and one row per role in the access matrix (tests/server/handlers/test_access_matrix.py, which
# fails for a form without them).
ADDRESS_FORMS: tuple[AddressForm, ...] = (
    AddressForm("~/memory", ("~/memory/",), ("~/memory",), _read_memory, _write_memory, example="~/memory/<path>"),
    AddressForm("~/tools", ("~/tools/",), ("~/tools",), _read_tools, _write_tools, example="~/tools/<name>"),
    AddressForm("~/self", (), ("~/self", "~/self/"), _read_self),
    AddressForm("~/triggers", ("~/triggers/",), ("~/triggers",), _read_triggers, _write_triggers,
                example="~/triggers/<name>"),
    AddressForm("thread:", ("thread:",), (), _read_thread, example="thread: or thread:<id>"),
    AddressForm("run:", ("run:",), (), _read_run, example="run:<id>"),
    AddressForm("attachment:", ("attachment:",), (), _read_attachment, example="attachment:<id>"),
    AddressForm("hm://", ("hm://",), (), _read_hm, _write_hm, example="hm://<account>/<path>"),
    AddressForm("activity:", ("activity:",), (), _read_activity),
    # (reading a CID saves the file to the agent's memory, as the reference does: a write)
    AddressForm("ipfs://", ("ipfs://", "ipfs:"), (), _read_ipfs, _write_ipfs, read_needs=WRITER,
                example="ipfs://<cid>"),
    AddressForm("https://", ("https://", "http://"), (), _read_web, example="https://…"),
)


def form_of(address: str) -> AddressForm | None:
    return next((f for f in ADDRESS_FORMS if f.matches(address)), None)


# -- the callables of `call` ---------------------------------------------------------------------

async def _search_memory(surface: ToolSurface, tool_input: object, call_id: str) -> ToolResult:
    # this server's own: the agent's memory, full text (its input checked by search_input)
    return await memory_tools.search(surface.ctx, memory_tools.search_input(tool_input))


async def _wait(surface: ToolSurface, tool_input: object, call_id: str) -> ToolResult:
    return delegation_tools.wait(surface.delegating, call_id, tool_input)


async def _search(surface: ToolSurface, tool_input: dict, call_id: str) -> ToolResult:
    return await hm_tools.search(surface.ctx, tool_input)


async def _web_search(surface: ToolSurface, tool_input: dict, call_id: str) -> ToolResult:
    return await surface._web().search(tool_input)


async def _execute(surface: ToolSurface, tool_input: dict, call_id: str) -> ToolResult:
    return await code_tools.execute(surface.ctx, tool_input, call_id)


# The address forms `navigate` opens: rows of ADDRESS_FORMS, read as `read` reads them (a page of
# the web, a Seed document). A new one is one name here.
NAVIGATES = ("https://", "hm://")


async def _navigate(surface: ToolSurface, tool_input: dict, call_id: str) -> ToolResult:
    url = tool_input["url"].strip()
    form = form_of(url)
    if form is None or form.name not in NAVIGATES:
        raise ToolFailure("navigate opens https:// pages and hm:// documents")
    return await form.read(surface, url, {})


def _always(surface: ToolSurface) -> bool:
    return True


@dataclass(frozen=True)
class CallableTool:
    """One callable of `call` this server runs: its name (the registry's record, or the server's
    own), the adapter that hands the checked input to its group's module, and what the rest of
    the server reads of it."""

    name: str
    run: Callable                        # async (surface, input, call id) -> ToolResult
    read_only: bool = False              # changes nothing: after a crash, a recorded call may run again
    offered_if: str | None = None        # offered only with this capability ("web_search", "code_exec")
    own: bool = False                    # this server's own: before the agent's tools, never listed as offered
    applies: Callable[[ToolSurface], bool] = _always   # (own rows) where the surface takes it
    unavailable: str | None = None       # the answer when it is not offered here (else: the listing)


# Every callable of `call` (issue 33: extension points as tables). A new tool is its registry
# record, its work in its group's module, and one row here with its adapter beside the others;
# `offered_callables`, `READ_ONLY_CALLABLES` and `_call` read the rows.
CALLABLE_TOOLS: dict[str, CallableTool] = {t.name: t for t in (
    CallableTool(memory_tools.SEARCH_MEMORY, _search_memory, read_only=True, own=True),
    CallableTool("wait", _wait, read_only=True, own=True, applies=lambda s: s.delegating is not None),
    CallableTool("search", _search, read_only=True),
    CallableTool("web_search", _web_search, read_only=True, offered_if="web_search"),
    CallableTool("navigate", _navigate, read_only=True),
    CallableTool("execute", _execute, offered_if="code_exec",
                 unavailable="execute is not enabled for this agent, or this server cannot run code (health: codeExec)"),
)}
READ_ONLY_CALLABLES = frozenset(t.name for t in CALLABLE_TOOLS.values() if t.read_only)


def _contract(tool: registry.Tool, errors: list[str]) -> ToolResult:
    return ToolResult({
        "summary": f"Input for {tool.name} did not match its contract — here it is; call again with valid input.",
        "contract": registry.contract_markdown(tool),
        "validationErrors": errors,
    })

"""What a tool gets to act with, and what it hands back.

A tool acts for one agent in one session's run: `ToolContext` names them, says whose authority
the call runs with (`authority`, server/tools/authority.py), and carries the only ways out (the
store, the publisher, the web client under the network policy, the HM client). It is built in one
place for every entry point (server/runtime/tool_context.py).
Nothing a tool returns changes the system prompt or the tool set: its output is data for the
model and the event log.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..publisher import Publisher
from .authority import Authority


class ToolFailure(Exception):
    """A tool could not do what was asked; the message goes to the model as the call's error
    (the run goes on)."""


@dataclass(frozen=True)
class Park:
    """Returned by a tool whose answer comes later (delegation, a wait): the loop records the
    call, leaves its result open and ends the turn with the run parked (`waiting`)."""

    reason: str
    detail: dict = field(default_factory=dict)


@dataclass
class ToolResult:
    output: Any = None             # JSON-like value (for the model and the tool_result event)
    error: str | None = None       # the call failed: this is what the model is told
    park: Park | None = None


@dataclass
class ToolContext:
    db: Any                        # a seed_agents.server.database.port.Storage (either backend)
    publisher: Publisher
    now_ms: Callable[[], int]
    account: str                   # the agent's owner: whose rows (memory, identities, quota) its tools touch
    agent: dict                    # AgentInfo (its definition names the identities it may use)
    session_id: str
    run_id: str
    web: Any = None                # seed_agents.server.tools.web.WebAccess, or None: no web tools
    hm: Any = None                 # an HM client (read_document / publish_document), or None
    box: Any = None                # the secrets box: opens a signing identity's seed to publish
    callables: tuple[str, ...] = ()   # the callable tools this server offers (the `call` verb)
    authority: Authority = None    # who the call runs for: required (keyword, after the defaults above)
    config: Any = None             # the server's Config (bounds: file quota, memory files, output cap)
    code: Any = None               # seed_agents.server.tools.code_tools.CodeExec, or None: no sandbox
    started: Any = None            # started(effects): publish a turn a tool queued (a detached child), and start it
    triggers: Any = None           # a trigger_tools.TriggerAdmin (the trigger tools), or None: no triggers

    def __post_init__(self) -> None:
        if not isinstance(self.authority, Authority):   # never a silent default: say who asks
            raise TypeError("a ToolContext needs the Authority its calls run with")

"""What a tool gets to act with, and what it hands back.

A tool acts for one agent in one session's run: `ToolContext` names them and carries the only
ways out (the store, the publisher, the web client under the network policy, the HM client).
Nothing a tool returns changes the system prompt or the tool set: its output is data for the
model and the event log.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..publisher import Publisher


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
    db: Any                        # a seed_agents.server.storage.port.Storage (either backend)
    publisher: Publisher
    now_ms: Callable[[], int]
    account: str
    agent: dict                    # AgentInfo (its definition names the identities it may use)
    session_id: str
    run_id: str
    web: Any = None                # seed_agents.server.tools.web.WebAccess, or None: no web tools
    hm: Any = None                 # an HM client (read_document / publish_document), or None
    box: Any = None                # the secrets box: opens a signing identity's seed to publish
    callables: tuple[str, ...] = ()   # the callable tools this server offers (the `call` verb)

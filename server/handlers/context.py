"""The handlers' port: everything an action handler may use, declared here, in the layer that
needs it. A handler is `async def handler(ctx: HandlerContext, env, action) -> dict`; the
composition root (server/app.py) builds one `HandlerContext` from the parts it made, and that
object, not the App, is what dispatch hands every handler: it holds these fields and nothing
else, so a handler cannot reach past them (mypy fails one that tries, and the root fails the
type check when a part stops filling its field's protocol).

- storage (`db`), clock (`now_ms`), configuration (`config`);
- `broadcaster`: publishing after a commit (server/live/broadcaster.py);
- `runtime`: `RunControl` (server/runtime/control.py) and the runtime's pools and caches;
- `grants`: changes of access reaching live subscribers (server/live/grants.py);
- `triggers`: trigger administration (`TriggerAdmin`, server/tools/trigger_tools.py, and firing);
- the secrets box, the session heads' key, the signer cache and the in-memory caches;
- `publications`: the publication queue, woken when a handler queued something.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..publisher import Publisher
from ..runtime.control import RunControl
from ..database.port import Storage
from ..store.secrets import SecretBox
from ..tools.trigger_tools import TriggerAdmin


class Broadcast(Publisher, Protocol):
    """Publishing as the handlers use it: the runtime's Publisher, plus deletions and the
    notices that go to one account's key alone."""

    def publish_change(self, key: str, value: dict) -> None: ...
    def publish_gone(self, key: str, notice: dict) -> None: ...
    def notify_only(self, account_id: str, reason: str, *, agent_id: str | None = None,
                    session_id: str | None = None) -> None: ...


class HandlerRuntime(RunControl, Protocol):
    """RunControl, and what a handler borrows from the runtime: its network pools (each under
    its policy), the provider lookup, the code sandbox, the preamble listings, and a person's
    tool surface (InvokeSessionTool)."""

    @property
    def providers(self) -> Any: ...
    @property
    def http(self) -> Any: ...
    @property
    def hm_http(self) -> Any: ...
    @property
    def download_http(self) -> Any: ...
    @property
    def download_slots(self) -> Any: ...
    @property
    def code(self) -> Any: ...
    @property
    def preambles(self) -> Any: ...
    @property
    def timings(self) -> Any: ...   # server/operations/turn_timing.TurnTimings, None unless --turn-timings
    async def user_surface(self, agent: dict, session_id: str, account: str, role: str) -> Any: ...


class AccessChanges(Protocol):
    """A change of access reaching the live subscriptions at once (server/live/grants.Grants)."""

    def changing(self, agent_id: str) -> AbstractAsyncContextManager: ...
    def changing_now(self, agent_id: str | None) -> bool: ...
    async def settled(self, agent_id: str) -> None: ...
    @property
    def epoch(self) -> int: ...   # moves with every change of access and deletion
    def moved_since(self, epoch: int, agent_id: str | None) -> bool: ...
    def checked(self, account: str, key: str, role: str | None, agent_id: str | None) -> None: ...
    def leaving(self, agent_id: str, accounts: Iterable[str]) -> AbstractContextManager: ...
    def cut_account(self, account: str, agent_id: str, why: str) -> None: ...
    def cut_agent(self, agent_id: str, why: str) -> None: ...
    def refresh(self, agent_id: str, accounts: Iterable[str], why: str) -> None: ...
    def guest_accounts(self, agent_id: str) -> list[str]: ...
    def audience(self, agent_id: str) -> tuple[str, ...]: ...
    def forget_audience(self, agent_id: str) -> None: ...


class TriggerActions(TriggerAdmin, Protocol):
    """The trigger tools' port, and a firing by hand (FireAgentTrigger)."""

    async def fire(self, trigger: dict, event: Any) -> Any: ...


@dataclass(slots=True)
class HandlerContext:
    """The handlers' port, filled once by the composition root after its parts are built.
    Not frozen: the root's clock is injected (tests move it), and `now_ms` follows it."""

    db: Storage
    config: Any   # server/config.Config (the settings table)
    now_ms: Callable[[], int]
    broadcaster: Broadcast
    runtime: HandlerRuntime
    grants: AccessChanges
    triggers: TriggerActions
    secrets: SecretBox
    heads: Any    # server/heads.Heads: the signed session heads' key
    cache: dict   # the named in-memory caches (server/cache.py)
    publications: Any   # server/hypermedia/publications.PublicationQueue, None without an HM server
    # the signer cache (server/app.py keeps it; registering and unregistering a signer change it)
    remember_signer: Callable[..., Any]
    forget_signer: Callable[[str, str], None]

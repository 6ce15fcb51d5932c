"""The handlers' port: everything an action handler may use, declared here, in the layer that
needs it. A handler is `async def handler(app: HandlerContext, env, action) -> dict`; the
composition root (server/app.py) is the one implementation, and mypy checks both sides (a
handler reaching for something not declared here fails the type check, and so does an App that
stops offering one of these).

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
    async def user_surface(self, agent: dict, session_id: str, account: str, role: str) -> Any: ...


class AccessChanges(Protocol):
    """A change of access reaching the live subscriptions at once (server/live/grants.Grants)."""

    def changing(self, agent_id: str) -> AbstractAsyncContextManager: ...
    def changing_now(self, agent_id: str | None) -> bool: ...
    async def settled(self, agent_id: str) -> None: ...
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


class HandlerContext(Protocol):
    @property
    def db(self) -> Storage: ...
    @property
    def config(self) -> Any: ...   # server/config.Config (the settings table)
    @property
    def now_ms(self) -> Callable[[], int]: ...
    @property
    def broadcaster(self) -> Broadcast: ...
    @property
    def runtime(self) -> HandlerRuntime: ...
    @property
    def grants(self) -> AccessChanges: ...
    @property
    def triggers(self) -> TriggerActions: ...
    @property
    def secrets(self) -> SecretBox: ...
    @property
    def heads(self) -> Any: ...    # server/heads.Heads: the signed session heads' key
    @property
    def cache(self) -> dict: ...   # the named in-memory caches (server/cache.py)
    @property
    def publications(self) -> Any: ...   # server/hypermedia/publications.PublicationQueue, None without an HM server
    def remember_signer(self, account_id: str, signer_id: str, expires_at: int | None = None) -> Any: ...
    def forget_signer(self, account_id: str, signer_id: str) -> None: ...

"""The triggers' port: everything a firing, the schedule loop, the activity monitor, a headless
tool run and a webhook may use, declared here, in the layer that needs it. The composition root
(server/app.py) builds one `TriggerContext` from the parts it made and hands it to `Triggers`;
`firing.admit` and the rest take that object, never the App, so nothing in triggers/ climbs
back up through a locator (mypy checks each part against its field's protocol where the root
builds it).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..database.port import Storage
from ..publisher import Publisher
from ..runtime.control import RunControl
from ..store.secrets import SecretBox
from .clock import ManualClock, TriggerClock


class TriggerRuntime(RunControl, Protocol):
    """RunControl (a new thread's kick, a woken run's settling), and what a headless tool run
    builds its surface from (server/runtime/tool_context.build_surface takes the runtime whole)."""

    @property
    def hm(self) -> Any: ...   # server/hypermedia/client.HmClient, None without an HM server


class Tasks:
    """The headless tool runs under way: started after a firing's commit, ended at stop."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def stop(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)


@dataclass(slots=True)
class TriggerContext:
    """The triggers' port, filled once by the composition root. Not frozen: the root's clock is
    injected (tests move it), and `now_ms` follows it."""

    db: Storage
    config: Any   # server/config.Config (the settings table)
    now_ms: Callable[[], int]   # the server's real clock: sessions, events and runs keep it
    broadcaster: Publisher
    runtime: TriggerRuntime
    metrics: Any   # server/operations/metrics.Metrics (firings and wake-ups counted)
    secrets: SecretBox   # webhook secrets are sealed
    clock: TriggerClock | ManualClock   # the triggers' own (schedules, firings' times): clock.trigger_clock
    tasks: Tasks = field(default_factory=Tasks)

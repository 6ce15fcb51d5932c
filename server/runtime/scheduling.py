"""How runs reach the runtime's turns: the `RunQueue` protocol a scheduling strategy implements,
and the `SessionWorker`, the one task per session a strategy runs that session's turns in.

Two strategies, chosen once when the runtime is built (server/runtime/runner.py, from the
store's traits):
- `seed_agents.server.runtime.local_queue.LocalQueue`: one process owns the store (a SQLite file, or a
  single server); a session's worker reads its queued runs itself, oldest first.
- `seed_agents.server.runtime.leased_queue.LeasedQueue`: several servers on one PostgreSQL database; runs
  are claimed under this server's lease (`seed_agents.server.runtime.leasing.RunLeases`) and handed to their
  sessions' workers already running.

The turn (runner.py, tool_loop.py, parked.py) asks its queue only what this protocol says and
never which strategy it is: a new strategy is one module implementing `RunQueue`, plus the line
in `Runtime.__init__` that chooses it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol


class SessionWorker:
    """The one task that runs a session's runs, one at a time, and what stops it."""

    __slots__ = ("task", "run_id", "stopped_run", "gone")

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.run_id: str | None = None        # the run whose turn is executing, between turns None
        self.stopped_run: str | None = None   # that turn was stopped (not shut down): it ends 'canceled'
        # The session was deleted while the worker lived: it publishes and writes nothing more
        # for it, and ends.
        self.gone = False

    def stop_turn(self, run_id: str | None = None) -> None:
        """Cancel the executing turn (only if it runs `run_id`, when given)."""
        if self.run_id is not None and (run_id is None or run_id == self.run_id):
            self.stopped_run = self.run_id
            self.task.cancel()


class RunQueue(Protocol):
    """What the runtime needs of a scheduling strategy. A strategy starts the session workers
    (in `runtime.workers`) and has each run its runs through `runtime.execute(run, worker,
    agent)`; the turn asks it the rest."""

    async def recover(self) -> None:
        """At start, before any turn: put back what a dead process left half-done, as far as
        this server may touch it."""

    def start(self) -> None:
        """Begin handing runs to session workers (after recovery and the runtime's own start)."""

    async def stop(self) -> None:
        """At shutdown, once the workers are canceled: hand back what this server still holds."""

    def kick(self, session_id: str) -> None:
        """A run of the session was queued or woken: have it run soon."""

    def claim_in(self, conn, now: int) -> object:  # noqa: ANN001
        """Inside a write job that queued a run: take runs for this server in that write's own
        transaction, where the strategy can (leases); what it gives goes to `took`."""

    def took(self, claim: object) -> bool:
        """After that write committed: start what `claim_in` took; True when the queue should
        still be kicked (nothing was taken, or there may be more)."""

    def begin(self, run: dict, agent: dict) -> tuple[dict, dict]:
        """The run as its turn starts here, and its agent: marked running (if not yet)."""

    def holds(self, run: dict) -> bool:
        """Whether this server may still run `run` (checked before its turn starts)."""

    def still_ours(self, run: dict) -> Callable[..., bool] | None:
        """`(conn) -> bool`, checked inside each write of the run's turn and of its ending: is
        the run still this server's? None when no other server can take it (nothing to check)."""

    def release(self, run: dict) -> None:
        """The run's turn is over here (its ending written, its parking, or nothing to write)."""

    def forget(self, run_ids: Iterable[str]) -> None:
        """These runs were ended (here or on another server): one held but not yet started is
        let go."""

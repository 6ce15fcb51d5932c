"""RunControl: what the layers above the runtime may ask of the runs (the handlers, the triggers,
the cluster relay). The runtime owns it and `Runtime` (server/runtime/runner.py) is the one
implementation, so no caller reaches into the runtime's parts (its parked-run clock, its hook
slots) to stop, cancel or wake a run."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from ..store.delegation import Settled

# (conn, ended RunInfo) -> [publish, ...]: told inside the transaction that ends a run.
RunEndHook = Callable[[object, dict], list]


class RunControl(Protocol):
    def kick(self, session_id: str) -> None:
        """A run of the session was queued or woken: take it up."""

    def claim_in(self, conn, now: int) -> object:  # noqa: ANN001
        """Inside a write job that queued a run: take runs for this server in the same
        transaction where the scheduling can; hand the value to `took` after the commit."""

    def took(self, claim: object) -> bool:
        """After that write committed: start what `claim_in` took; True when the write's queued
        sessions should still be kicked."""

    def cancel_in(self, conn, runs: list[dict], now: int) -> tuple[list[dict], Settled]:  # noqa: ANN001
        """Inside a write job: `runs` and their live descendants end 'canceled', the run-end hook
        told of each no turn was running. Returns (canceled, settled) for `settle` after the commit."""

    def publish_runs(self, runs: list[dict]) -> None:
        """RunInfo of each (after a commit)."""

    def settle(self, settled: Settled) -> None:
        """After the commit: what a transaction did to run trees published, woken runs kicked."""

    def interrupt_runs(self, run_ids: Iterable[str]) -> None:
        """This server's turns of these (ended) runs stop."""

    async def stop_session(self, session_id: str) -> bool:
        """StopSession: the session's queued and live runs end; True when there was one."""

    def abandon_sessions(self, session_ids: Iterable[str]) -> None:
        """The sessions are being deleted: their workers publish nothing more."""

    async def signal(self, run_id: str, name: str, payload) -> bool:  # noqa: ANN001
        """SignalRun: deliver a signal to a parked run; True when one was waiting for it."""

    def parked_elsewhere(self) -> None:
        """A run was parked by another server of the cluster: this server's clock looks again."""

    def on_run_end(self, hook: RunEndHook) -> None:
        """The composition root's wiring: `hook` is told of every run's end, in its transaction."""

"""Leased scheduling (`RunQueue`, server/runtime/scheduling.py): several servers on one
PostgreSQL database claim queued runs under leases (`seed_agents.server.runtime.leasing.RunLeases`).

A claimed run arrives already running under this server's lease, its agent marked running in the
claim's transaction, and goes to its session's worker; a kick only wakes the claim loop (the run
claimed next is whichever is oldest and claimable, not only the kicked session's). Each write of
the turn and its ending is made only while this server still holds the lease (checked in the
write's own transaction), so each run is answered once; a turn whose lease is lost (the run was
stopped, canceled or requeued elsewhere) is canceled and its result dropped. At start nothing is
recovered here: a running run may be another live server's, and only an expired lease says it is
not (the claim loop requeues those). A clean stop hands the held runs back to the queue.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

from ..store import leases as leases_q
from .leasing import RunLeases
from .scheduling import SessionWorker

log = logging.getLogger("seed_agents.runtime")


class ClaimedWorker(SessionWorker):
    """A session's worker fed by claims."""

    __slots__ = ("claimed",)

    def __init__(self) -> None:
        super().__init__()
        # The runs claimed for this session, with their agents, not yet executed (the claim
        # hands over one at a time; a next one can arrive while the last one ends).
        self.claimed: deque[tuple[dict, dict | None]] = deque()


class LeasedQueue:
    def __init__(self, runtime, leases: RunLeases) -> None:  # noqa: ANN001
        self.rt = runtime
        self.leases = leases

    async def recover(self) -> None:
        pass   # another live server's runs are not this one's to requeue; expired leases are

    def start(self) -> None:
        self.leases.after_pass = self.rt.parked.refresh
        self.leases.start(self._claimed, self._lease_lost, self._requeued)

    async def stop(self) -> None:
        # The runs it held go back to the queue now, for the other servers to claim.
        self._requeued(await self.leases.stop())

    def kick(self, session_id: str) -> None:
        self.leases.wake()   # whichever run is oldest and claimable, not only this session's

    def claim_in(self, conn, now: int):  # noqa: ANN001, ANN201
        return self.leases.claim_in(conn, now)

    def took(self, claim) -> bool:  # noqa: ANN001
        return self.leases.took(claim)

    def begin(self, run: dict, agent: dict) -> tuple[dict, dict]:
        return run, agent   # claimed: already running, its agent marked running with the claim

    def holds(self, run: dict) -> bool:
        # False once ended elsewhere (or the lease lost) between the claim and now.
        return self.leases.holds(run["id"], run["attempt"])

    def still_ours(self, run: dict):  # noqa: ANN201
        run_id, owner, attempt = run["id"], self.leases.owner, run["attempt"]
        return lambda conn: leases_q.holds(conn, run_id, owner, attempt)

    def release(self, run: dict) -> None:
        self.leases.drop(run["id"], run["attempt"])

    def forget(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:   # (its lease went with its ending)
            self.leases.drop(run_id)

    # -- what the claim loop reports --------------------------------------------------------
    def _claimed(self, runs: list[dict], agents: dict[str, dict]) -> None:
        """Runs just claimed (running under this server's lease) go to their sessions' workers."""
        rt = self.rt
        if rt.closing:
            return   # still held: stop() hands them back to the queue
        for run in runs:
            session_id = run["sessionId"]
            worker = rt.workers.get(session_id)
            if worker is not None and worker.run_id == run["id"]:
                # Still executing an older attempt of it here (its lease ran out while this
                # server stalled, and it was requeued): that turn can no longer answer it.
                worker.stop_turn(run["id"])
            if worker is None:
                worker = rt.workers[session_id] = ClaimedWorker()
                worker.task = asyncio.create_task(self._work(session_id, worker), name=f"runs:{session_id}")
            worker.claimed.append((run, agents.get(run["agentId"])))

    async def _work(self, session_id: str, worker: ClaimedWorker) -> None:
        rt = self.rt
        try:
            while worker.claimed and not rt.closing and not worker.gone:
                run, agent = worker.claimed.popleft()
                try:
                    await rt.execute(run, worker, agent)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # (e.g. the store unreachable at the ending): the lease is let go unrenewed,
                    # so the run returns to the queue when it runs out and is answered then.
                    log.exception("run %s could not be ended; it is requeued when its lease runs out",
                                  run["id"])
                    self.release(run)
        finally:
            if rt.workers.get(session_id) is worker:
                del rt.workers[session_id]
            if worker.gone:   # a deleted session's runs: their rows were ended with it
                for run, _ in worker.claimed:
                    self.release(run)
            self.leases.wake()   # the session's next run may be claimable now

    def _requeued(self, runs: list[dict]) -> None:
        """Runs back in the queue (a lease ran out, or this server stopped): their interrupted
        turns end for clients (a `done` partial, as every turn does), and the runs show queued."""
        rt = self.rt
        rt.metrics.runs_requeued.inc(len(runs))
        for run in runs:
            if "sessionId" in run:
                rt.publisher.publish_partial(run["sessionId"], run["id"], {"done": True})
        rt.publish_runs(runs)

    def _lease_lost(self, run_id: str) -> None:
        for worker in list(self.rt.workers.values()):
            if worker.run_id == run_id:
                worker.stop_turn(run_id)

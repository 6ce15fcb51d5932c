"""Local scheduling (`RunQueue`, server/runtime/scheduling.py): one process owns the store (a
SQLite file, or a single server), so the runs table is read in process.

A kick starts the session's worker if it has none; the worker reads the session's oldest queued
run, runs it, and reads again until none is left. Nothing else can take a run, so a run is held
from its start to its ending with no lease; at start, the runs a dead process left running go
back to the queue.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from ..store import agents as agents_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from .scheduling import SessionWorker


class LocalQueue:
    def __init__(self, runtime) -> None:  # noqa: ANN001
        self.rt = runtime

    async def recover(self) -> None:
        now = self.rt.now_ms()

        def job(conn):
            # Whatever a dead process left half-done: its running runs go back to the queue, and
            # statuses are recomputed from the runs, so no session stays 'streaming' for nothing.
            runs_q.requeue_interrupted(conn, now)
            agents_q.settle_running_agents(conn, now)
            for session_id in sessions_q.ids_with_status(conn, "streaming"):
                sessions_q.set_session_status(conn, session_id, runs_q.session_status_from_runs(conn, session_id), now)

        await self.rt.db.write(job)

    def start(self) -> None:
        for run in self.rt.db.read(runs_q.queued_runs, 100_000):
            if "sessionId" in run:
                self.rt.kick(run["sessionId"])

    async def stop(self) -> None:
        pass   # a run interrupted by the shutdown stays 'running' in the file: recover() requeues it

    def kick(self, session_id: str) -> None:
        workers = self.rt.workers
        if session_id in workers:
            return
        worker = workers[session_id] = SessionWorker()
        worker.task = asyncio.create_task(self._work(session_id, worker), name=f"runs:{session_id}")

    async def _work(self, session_id: str, worker: SessionWorker) -> None:
        rt = self.rt
        try:
            while not rt.closing and not worker.gone:
                runs = rt.db.read(runs_q.queued_runs_of_session, session_id, 1)
                if not runs:
                    break  # no await between this read and leaving the table below
                await rt.execute(runs[0], worker, rt.db.read(agents_q.get_agent, runs[0]["agentId"]))
        finally:
            if rt.workers.get(session_id) is worker:
                del rt.workers[session_id]

    def claim_in(self, conn, now: int) -> None:  # noqa: ANN001
        return None   # the kick starts the session's worker

    def took(self, claim: object) -> bool:
        return True

    def begin(self, run: dict, agent: dict) -> tuple[dict, dict]:
        now = self.rt.now_ms()
        running = runs_q.transition(run, "running", now)
        before, agent_id = run["status"], run["agentId"]

        def job(conn):
            if runs_q.save_run(conn, before, running):
                agents_q.set_agent_status(conn, agent_id, "running", now, decoded=False)

        # Not waited for: the turn goes on while it commits (the writer keeps order, so it lands
        # before the reply). If the process dies first, the run is still 'queued' in the file and
        # simply runs again at start, as a 'running' one would: so it is lazy, and a short turn's
        # ending carries it in its own commit (one fsync per turn less; docs/performance.md).
        self.rt.db.write_nowait(job, lazy=True)
        return running, {**agent, "status": "running", "updatedAt": max(agent["updatedAt"], now)}

    def holds(self, run: dict) -> bool:
        return True

    def still_ours(self, run: dict) -> None:
        return None

    def release(self, run: dict) -> None:
        pass

    def forget(self, run_ids: Iterable[str]) -> None:
        pass

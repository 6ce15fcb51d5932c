"""The run queue shared by several servers (a PostgreSQL store): claims, leases, renewals.

One `RunLeases` per process: the loops of the leased scheduling strategy
(server/runtime/leased_queue.py, chosen when the store's traits say `run_leases`). It claims
queued runs under this process's lease (`seed_agents.server.store.leases`), when told that this server
queued one (`wake`), every `--run-poll-interval`, and right after requeueing runs whose lease ran
out; it renews the leases it holds every third of `--run-lease`, and tells the leased queue which
runs it lost (ended or requeued elsewhere), so their turns stop and their results are dropped. A clean stop
hands the held runs back to the queue at once; a dead server's come back when its leases run out.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable

from ..database.workers import DatabaseClosed
from ..store import agents as agents_q
from ..store import leases as leases_q
from ..store.errors import NotFound

log = logging.getLogger("seed_agents.runtime")

# Runs claimed in one transaction (at most one per session); a full batch claims again at once.
CLAIM_BATCH = 16


def _claim(conn, owner: str, lease_ms: int, now: int) -> tuple[list[dict], dict[str, dict]]:  # noqa: ANN001
    """Up to CLAIM_BATCH runs claimed under `owner`'s lease, and their agents marked running."""
    claimed = leases_q.claim(conn, owner, lease_ms, now, CLAIM_BATCH)
    agents: dict[str, dict] = {}
    # One order for the agents' row locks on every server (no deadlock between claimers).
    for agent_id in sorted({r["agentId"] for r in claimed}):
        try:
            agents[agent_id] = agents_q.set_agent_status(conn, agent_id, "running", now)
        except NotFound:
            pass
    return claimed, agents


def server_id() -> str:
    """This process's name in `runs.lease_owner`: readable by an operator, never reused."""
    return f"{socket.gethostname()[:64]}/{os.getpid()}/{secrets.token_hex(4)}"


class RunLeases:
    def __init__(self, db, now_ms: Callable[[], int], lease_seconds: float, poll_seconds: float) -> None:
        self.db = db
        self.now_ms = now_ms
        self.owner = server_id()
        self.lease_ms = max(1, int(lease_seconds * 1000))
        self.renew_every = lease_seconds / 3
        self.poll_every = poll_seconds
        # The runs this process holds the lease of (claimed, not yet ended): run id -> (the
        # attempt it claimed, when the lease was last confirmed: time.monotonic() before the
        # claim or renewal was sent). A run requeued and claimed again here is a new attempt.
        self.held: dict[str, tuple[int, float]] = {}
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        # Called after each claim pass: the runtime re-reads the earliest wake time of parked runs
        # (a run parked by a server that died never announced it), at the pace of the queue's poll.
        self.after_pass: Callable[[], None] | None = None

    def start(self, dispatch: Callable[[list[dict], dict[str, dict]], None],
              lost: Callable[[str], None], requeued: Callable[[list[dict]], None]) -> None:
        """`dispatch(runs, agents by id)` gets each batch of claimed runs (already running, their
        agents marked running); `lost(run_id)` is called for a held run whose lease is gone;
        `requeued` gets the runs requeued after their lease ran out."""
        self._wake = asyncio.Event()
        self._dispatch, self._lost, self._requeued = dispatch, lost, requeued
        self._tasks = [asyncio.create_task(self._claim_loop(), name="runs:claim"),
                       asyncio.create_task(self._renew_loop(), name="runs:renew")]

    def wake(self) -> None:
        """A run was queued (or a session's run ended): claim now rather than at the next poll."""
        if self._wake is not None:
            self._wake.set()

    def holds(self, run_id: str, attempt: int) -> bool:
        held = self.held.get(run_id)
        return held is not None and held[0] == attempt

    def drop(self, run_id: str, attempt: int | None = None) -> None:
        """The run's lease ended here (its answer committed, or it was lost or stopped); with
        `attempt`, only if that is the attempt held."""
        held = self.held.get(run_id)
        if held is not None and (attempt is None or held[0] == attempt):
            del self.held[run_id]

    async def stop(self) -> list[dict]:
        """Stop claiming and renewing; hand the runs still held back to the queue (returned)."""
        # The claim loop ends its pass rather than being canceled in it: a claim canceled while
        # its write commits would leave runs held here that nobody hands back.
        self._stopping = True
        self.wake()
        for task in self._tasks[1:]:   # the renewals
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if not self.held:
            return []
        held, self.held = list(self.held), {}
        try:
            return await self.db.write(leases_q.release, self.owner, held, self.now_ms())
        except Exception as exc:   # the store is gone: the leases simply run out
            log.warning("could not hand back %d runs at stop (%s); they return to the queue when "
                        "their lease runs out", len(held), type(exc).__name__)
            return []

    # -- the loops ----------------------------------------------------------------------------
    async def _claim_loop(self) -> None:
        while not self._stopping:
            try:
                full = await self._claim_pass()
                if self.after_pass is not None:
                    self.after_pass()
            except DatabaseClosed:
                return
            except Exception:
                log.exception("claiming runs failed; trying again at the next poll")
                full = False
            if full or self._stopping:
                continue
            try:
                # asyncio.timeout, not wait_for: on 3.11 a cancel that lands as the wait ends can
                # be lost by wait_for, and this loop would then outlive its stop.
                async with asyncio.timeout(self.poll_every):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def _claim_pass(self) -> bool:
        """Requeue expired leases, then claim a batch; True when the batch was full."""
        now, sent = self.now_ms(), time.monotonic()
        owner, lease_ms = self.owner, self.lease_ms

        def job(conn):
            requeued = leases_q.requeue_expired(conn, now)
            claimed, agents = _claim(conn, owner, lease_ms, now)
            return requeued, claimed, agents

        requeued, claimed, agents = await self.db.write(job)
        if requeued:
            log.info("requeued %d runs whose lease ran out", len(requeued))
            self._requeued(requeued)
        return self._took(claimed, agents, sent)

    def _took(self, claimed: list[dict], agents: dict[str, dict], sent: float) -> bool:
        if claimed:
            self.held.update((r["id"], (r["attempt"], sent)) for r in claimed)
            self._dispatch(claimed, agents)
        return len(claimed) == CLAIM_BATCH

    # -- a claim inside the write that queued the run -------------------------------------------
    def claim_in(self, conn, now: int) -> tuple | None:  # noqa: ANN001
        """Inside a write job that queued a run (MessageSession's): claim as a pass does, in that
        write's own transaction, so the run is this server's when the write commits, without a
        claim pass of its own after it (a write job, a commit and its fsync less per turn:
        docs/performance.md, "A turn on PostgreSQL"). The expired leases are left to the passes.
        None when this server is not claiming (not started, or stopping). Hand the value to
        `took` once the write has committed."""
        if self._wake is None or self._stopping:
            return None
        sent = time.monotonic()   # (before the claim's statement: the lease runs from later)
        # In a savepoint of its own, sent with the claim (PgConn.begin): a claim that fails (a
        # race on a session's one live run lost to another server, a lock waited for past the
        # batch's bound) takes nothing and leaves the write whole; the claim loop tries again.
        conn.begin("SAVEPOINT claim")
        try:
            claimed, agents = _claim(conn, self.owner, self.lease_ms, now)
        except Exception as exc:
            if getattr(conn, "later_failed", False):
                raise   # a write of the job's own, sent with the claim (PgConn.later): the job's error
            if conn.pending:   # (its savepoint never went out)
                conn.begin()
            else:
                conn.execute("ROLLBACK TO SAVEPOINT claim")
            log.info("claiming in a write failed (%s); the claim loop takes the run", type(exc).__name__)
            return None
        return claimed, agents, sent

    def took(self, claim: tuple | None) -> bool:
        """After the write that ran `claim_in` committed: hold and hand on the runs it claimed.
        True when a claim pass should still run (nothing was claimed in the write, or its batch
        was full), as after a kick."""
        if claim is None:
            return True
        claimed, agents, sent = claim
        # (Held even while stopping: stop() hands them back, or, past its hand-back, they return
        # to the queue when their lease runs out, as a dead server's do.)
        return self._took(claimed, agents, sent) or not claimed

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every)
            asked = {run_id: attempt for run_id, (attempt, _) in self.held.items()}
            if not asked:
                continue
            sent = time.monotonic()
            try:
                kept = await self.db.write(leases_q.renew, self.owner, list(asked), self.lease_ms)
            except DatabaseClosed:
                return
            except Exception as exc:
                # Not renewed this time; the next renewal tries again. A lease not confirmed for
                # a whole lease may be another server's run by now: its turn stops here.
                log.warning("renewing %d run leases failed (%s)", len(asked), type(exc).__name__)
                stale = time.monotonic() - self.lease_ms / 1000
                kept = {run_id for run_id in asked if self.held.get(run_id, (0, stale))[1] > stale}
            else:
                for run_id in kept:
                    if self.holds(run_id, asked[run_id]):
                        self.held[run_id] = (asked[run_id], sent)
            for run_id, attempt in asked.items():
                # (Only the attempt asked about: one claimed again meanwhile has a fresh lease.)
                if run_id not in kept and self.holds(run_id, attempt):
                    del self.held[run_id]
                    log.info("run %s is no longer held by this server (ended, or its lease ran out)", run_id)
                    self._lost(run_id)

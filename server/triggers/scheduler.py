"""The schedule loop: one timer, set to the earliest slot any enabled schedule waits for.

It reads `min(next_due_at)` (one indexed read), waits until then (`clock.wait_until`), and fires
what is due in one write transaction per batch: `due_triggers` takes the due rows (on PostgreSQL
locked with `FOR UPDATE SKIP LOCKED`, the run queue's claim, so each slot is taken by one server
of a cluster), and for each trigger the latest due slot fires (`firing.admit`) while older ones a
stopped server missed are recorded as skipped; `next_due_at` moves past now in the same
transaction. A server killed mid-batch leaves the rows as they were, and the next server to look
takes them.

It never polls busily: between slots it sleeps. A change to a trigger wakes it (`wake`): one made
here at once, one made on another server of a cluster through that server's `trigger-*` account
notice (server/live/cluster.py). The timer is also capped at `MAX_SLEEP`, should a notice be lost.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone

from ..database.workers import DatabaseClosed
from ..store import triggers as triggers_q
from . import schedule as sched
from .firing import Event, admit
from .port import TriggerContext

log = logging.getLogger("seed_agents.triggers")

BATCH = 200          # triggers fired in one transaction; a full batch is followed at once by the next
CONTENDED_PAUSE = 0.05   # real seconds
MAX_SLEEP = 30.0     # real seconds: the longest the timer is set for (see the module doc)


def schedule_summary(schedule: dict, slot: int) -> str:
    at = datetime.fromtimestamp(slot / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"scheduled {schedule['kind']} at {at}"


def fire_due(conn, ctx: TriggerContext, policy, now: int, limit: int = BATCH) -> tuple[int, list]:
    """One batch: (triggers handled, publications)."""
    publish: list = []
    fired: dict[str, int] = {}   # each agent's firings of the last hour, counted once per batch
    due = triggers_q.due_triggers(conn, now, limit)
    for trigger in due:
        schedule = trigger["source"]["schedule"]
        slots, following = sched.due_slots(schedule, trigger["_nextDueAt"], now, trigger["_nextDueAt"])
        # Only the latest missed slots are recorded (at most the history kept).
        missed, latest = slots[:-1][-policy.keep:], slots[-1]
        for slot in missed:
            publish += admit(conn, ctx, trigger, _event(trigger, schedule, slot, now,
                                                        skip="missed: no server was running at this slot; only "
                                                             "the latest missed slot fires"), now, policy,
                             fired=fired).publish
        publish += admit(conn, ctx, trigger, _event(trigger, schedule, latest, now), now, policy, fired=fired,
                         next_due=following).publish
    return len(due), publish


def _event(trigger: dict, schedule: dict, slot: int, now: int, skip: str | None = None) -> Event:
    activity = {"type": "schedule", "scheduleKind": schedule["kind"], "scheduledAt": slot, "firedAt": now}
    if "timezone" in schedule:
        activity["timezone"] = schedule["timezone"]
    return Event(f"schedule:{trigger['id']}:{slot}", schedule_summary(schedule, slot), activity,
                 scheduled_at=slot, skip=skip)


class Scheduler:
    def __init__(self, ctx: TriggerContext, policy) -> None:  # noqa: ANN001
        self.ctx = ctx
        self.clock = ctx.clock
        self.policy = policy
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.passes = 0      # batches written (tests and the benchmark read it)
        self.wakeups = 0     # times the timer ended

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="triggers:schedule")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """A trigger changed here: look at the earliest slot again."""
        self._wake.set()

    async def _loop(self) -> None:
        db = self.ctx.db
        while True:
            self._wake.clear()
            try:
                due = await db.aread(triggers_q.earliest_due)
                if due is not None and due <= self.clock.now_ms():
                    if await self.tick():
                        continue   # the next slot may be due already (a full batch, a long outage)
                    # Due, yet nothing taken: another server holds those rows in its transaction
                    # (PostgreSQL). It commits within moments; look again shortly, not at once.
                    await asyncio.sleep(CONTENDED_PAUSE)
                    continue
            except DatabaseClosed:
                return
            except Exception:
                log.exception("the schedule pass failed; trying again at the next slot")
                await asyncio.sleep(1.0)
                continue
            await self.clock.wait_until(due, self._wake, MAX_SLEEP)
            self.wakeups += 1
            self.ctx.metrics.trigger_wakeups.inc()

    async def tick(self) -> int:
        """Fire what is due now; returns how many triggers were handled."""
        ctx, policy = self.ctx, self.policy
        now = self.clock.now_ms()
        handled, publish = await ctx.db.write(fire_due, ctx, policy, now)
        self.passes += 1
        for do in publish:
            do()
        return handled

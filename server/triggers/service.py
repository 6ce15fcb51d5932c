"""`Triggers`: the app's one object for triggers, made at start from its port (`port.TriggerContext`,
built by the composition root: storage, clocks, broadcaster, runtime, metrics, secrets). It owns the bounds,
the schedule loop, the activity monitor, and the ways other parts reach triggers: the runtime's
run-end hook (`run_ended`, called inside the transaction that ends a run; server/app.py hands it
to the runtime's `on_run_end`), webhook deliveries (`server/triggers/webhook.py`), and the
agent's own `write ~/triggers/<name>` (`create`, `update`, `new_secret`: this object fills the
tools' `TriggerAdmin` port, server/tools/trigger_tools.py, so the tools never import the
triggers that run them)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from seed_agents.protocol.api.actions_triggers import ACTIVITY_SOURCES

from ..runtime import turns
from ..store import trigger_firings as firings_q
from ..store import triggers as triggers_q
from . import manage, webhook
from .backoff import failure_backoff
from .firing import Event, Policy, admit
from .port import TriggerContext

if TYPE_CHECKING:
    from .activity_monitor import ActivityMonitor
from .scheduler import Scheduler
from .webhook import Deliveries

log = logging.getLogger("seed_agents.triggers")


class Triggers:
    def __init__(self, ctx: TriggerContext) -> None:
        cfg = ctx.config
        self.ctx = ctx
        self.clock = ctx.clock
        self.policy = Policy(per_hour=cfg.trigger_firings_per_hour, keep=cfg.trigger_history,
                             account_per_hour=cfg.account_trigger_firings_per_hour,
                             turns=turns.TurnLimits.from_config(cfg))
        self.scheduler = Scheduler(ctx, self.policy)
        self.activity: ActivityMonitor | None = None
        self.deliveries = Deliveries(cfg.webhook_rate_limit)   # webhook calls per client address

    async def start(self) -> None:
        self.scheduler.start()
        if self.ctx.config.hm_server_url:
            from .activity_monitor import ActivityMonitor

            self.activity = ActivityMonitor(self)
            self.activity.start()

    async def stop(self) -> None:
        await self.ctx.tasks.stop()   # headless tool runs under way
        await self.scheduler.stop()
        if self.activity is not None:
            await self.activity.stop()

    def changed(self, trigger: dict | None = None) -> None:
        """A trigger was created, changed or deleted: here (`trigger` given), or on another server
        of a cluster (its `trigger-*` notice, server/live/cluster.py)."""
        self.scheduler.wake()
        if self.activity is not None and (trigger is None or trigger["source"]["type"] in ACTIVITY_SOURCES):
            self.activity.wake()

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def create(self, conn, owner: str, agent_id: str, spec, now: int, secret: str | None, *,
               others: bool = False, collaborator: bool = False) -> dict:
        """A new trigger inside a write job, with the actions' checks (server/triggers/manage.py)."""
        return manage.create(conn, self.ctx, owner, agent_id, spec, now, secret, others=others,
                             collaborator=collaborator)

    def update(self, conn, before: dict, patch, now: int, secret: str | None, *, others: bool = False,
               collaborator: bool = False) -> dict:
        return manage.update(conn, self.ctx, before, patch, now, secret, others=others, collaborator=collaborator)

    @staticmethod
    def new_secret() -> str:
        return webhook.new_secret()

    async def fire(self, trigger: dict, event: Event):
        """Admit one firing of `trigger` now (webhook, activity); publishes after the commit."""
        outcome = await self.ctx.db.write(self.admit_in, trigger["id"], event)
        for do in outcome.publish if outcome is not None else ():
            do()
        return outcome

    def admit_in(self, conn, trigger_id: str, event: Event):
        """Inside a write job: the trigger as it is now (None when it is gone or disabled)."""
        trigger = triggers_q.get_trigger(conn, trigger_id)
        if trigger is None or not trigger["enabled"]:
            return None
        return admit(conn, self.ctx, trigger, event, self.clock.now_ms(), self.policy)

    # -- run-completed --------------------------------------------------------------------------
    def run_ended(self, conn, run: dict) -> list:
        """Inside the transaction that ends `run` (server/runtime/runner.py): the firing that
        started it learns how it ended (a failure counts towards the trigger's backoff), and the
        account's run-completed triggers that match fire, keyed by the run's id. Returns the
        publications for after the commit."""
        now = self.clock.now_ms()
        status = run["status"]
        depth = 0
        started = firings_q.firing_of_run(conn, run["id"])
        if started is not None:
            firing_id, trigger_id, chain = started
            depth = chain + 1
            firings_q.set_run_status(conn, firing_id, status)
            if status == "succeeded":
                triggers_q.clear_failures(conn, trigger_id)
            elif status == "failed":
                failures = triggers_q.failures_of(conn, trigger_id) + 1
                message = (run.get("error") or {}).get("message", "the run failed")
                triggers_q.record_outcome(conn, trigger_id, now, fired=False,
                                          error=f"the run it started failed: {message}",
                                          backoff_ms=failure_backoff(failures))
        account = run.get("account")
        if not account:
            return []
        publish: list = []
        for trigger in triggers_q.enabled_of_type(conn, ("run-completed",), account):
            source = trigger["source"]
            if not run_matches(source, run, trigger["agentId"]):
                continue
            activity = {"type": "run-completed", "runId": run["id"], "runStatus": status,
                        "runTitle": run.get("title", ""), "agentId": run["agentId"]}
            if run.get("sessionId"):
                activity["sessionId"] = run["sessionId"]
            if run.get("error"):
                activity["error"] = run["error"]
            summary = f"{run.get('title') or 'a run'} {status}"
            outcome = admit(conn, self.ctx, trigger, Event(run["id"], summary, activity, chain_depth=depth),
                            now, self.policy)
            publish += outcome.publish
        return publish


def run_matches(source: dict, run: dict, own_agent: str) -> bool:
    # Without an agentId a trigger watches its own agent's runs, never the account's others.
    if source.get("agentId", own_agent) != run["agentId"]:
        return False
    if "status" in source and source["status"] != run["status"]:
        return False
    if "titleMatch" in source and source["titleMatch"].lower() not in (run.get("title") or "").lower():
        return False
    return True

"""Parked runs in the runtime: parking a turn, and the three things besides a cancel that wake a
parked run (a child's ending, a signal, the clock), each published after its commit.

A parked run holds no worker and no lease: its turn ended with `TurnResult.wait`, and the run
went to 'waiting' in one transaction with whatever the turn asked for (the children of its
delegate calls). A wake moves it back to 'queued' (seed_agents.server.store.parking, once, whichever server
wakes it) and kicks its session; the run then runs a turn again, whose history holds what the
wait brought (the children's `tool_result` events).

The clock: one timer per server, armed for the earliest wake time of all waiting runs (read from
the store at start, and again when this server parks a run with a wake time or hears that
another one did). No loop polls; a timer that fires wakes what is due and re-arms. Time comes
from the runtime's injected `now_ms`.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from seed_agents.protocol.agent import plans
from seed_agents.protocol.wire.errors import ProtocolError

from ..clock import new_id
from ..store import agents as agents_q
from ..store import delegation as delegation_q
from ..store import journal as journal_q
from ..store import parking
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from ..store import tool_events
from ..store.delegation import Settled
from ..store.errors import NotFound, Refused
from ..tools import records
from ..tools.context import ToolResult
from ..tools.delegation_tools import Delegation
from . import turns

log = logging.getLogger("seed_agents.runtime")

WAKE_BATCH = 100


@dataclass(slots=True)
class ParkRequest:
    """How a turn parks: on its delegate calls' children, or on a signal (event wait)."""

    delegations: list[Delegation]
    wait: dict | None = None     # an event wait: {reason: event, waitId, timeoutAt?, label?, answerWith?}
    match: dict | None = None    # what answers it: {signal?}
    journal: list[dict] | None = None   # entries the turn records with its parking (its calls)


class ParkedRuns:
    def __init__(self, runtime) -> None:
        self.rt = runtime
        self._timer: asyncio.TimerHandle | None = None
        self._at: int | None = None
        self._waking: asyncio.Task | None = None
        self._refreshing: asyncio.Task | None = None
        self._again = False   # a refresh asked for while one was reading

    # -- the clock ---------------------------------------------------------------------------
    def start(self) -> None:
        self.refresh()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._at = None, None
        if self._waking is not None:
            self._waking.cancel()
        if self._refreshing is not None:
            self._refreshing.cancel()

    def refresh(self) -> None:
        """Arm for the earliest wake time in the store (a run parked here or elsewhere), read off
        the loop (after every turn and claim pass: on PostgreSQL a round trip the loop would wait
        for). Across that await: `arm` only ever moves the timer sooner and a firing reads what is
        due again, so a stale answer costs at most an early wake; a refresh asked for while one
        reads (a park committed meanwhile) reads once more after it."""
        if self.rt.closing:
            return
        if self._refreshing is not None and not self._refreshing.done():
            self._again = True
            return
        self._refreshing = asyncio.get_running_loop().create_task(self._refresh(), name="runs:next-wake")

    async def _refresh(self) -> None:
        try:
            while True:
                self._again = False
                wake_at = await self.rt.db.aread(parking.next_wake)
                if self.rt.closing:
                    return
                self.arm(wake_at)
                if not self._again:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reading the next wake time failed; trying again in a second")
            self.arm(self.rt.now_ms() + 1000)

    def arm(self, wake_at: int | None) -> None:
        if wake_at is None or self.rt.closing:
            return
        if self._timer is not None and self._at is not None and self._at <= wake_at:
            return   # armed for something sooner
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, (wake_at - self.rt.now_ms()) / 1000)
        self._at = wake_at
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer, self._at = None, None
        if self._waking is None or self._waking.done():
            self._waking = asyncio.create_task(self.wake_due(), name="runs:wake")

    async def wake_due(self) -> int:
        """Wake every waiting run whose time has come; re-arm for the next. Returns how many."""
        woken = 0
        try:
            while True:
                now = self.rt.now_ms()
                due = self.rt.db.read(parking.due, now, WAKE_BATCH)
                progress = 0
                for run_id in due:
                    done = await self.rt.db.write(self._time_out, run_id, now)
                    if done is not None:
                        progress += 1
                        self.publish(done)
                woken += progress
                if len(due) < WAKE_BATCH or not progress:
                    break   # (a full batch none of which moved is not read again in a loop)
        except Exception:
            log.exception("waking parked runs failed; trying again in a second")
            self.arm(self.rt.now_ms() + 1000)
            return woken
        self.refresh()
        return woken

    @staticmethod
    def _time_out(conn, run_id: str, now: int) -> Settled | None:
        done = parking.time_out(conn, run_id, now)
        if done is None:
            return None
        return woken(*done)

    # -- signals -----------------------------------------------------------------------------
    async def signal(self, run_id: str, name: str, payload) -> bool:  # noqa: ANN001
        """SignalRun's delivery: True when it woke the run (once: a second signal finds it
        no longer waiting)."""
        now = self.rt.now_ms()

        def job(conn):
            done = parking.signal(conn, run_id, name, payload, now)
            if done is None:
                return None
            return woken(*done)

        settled = await self.rt.db.write(job)
        if settled is None:
            return False
        self.publish(settled)
        return True

    # -- publishing --------------------------------------------------------------------------
    def publish(self, settled: Settled) -> None:
        """After the commit: what a transaction did to run trees, then the woken runs' sessions
        are kicked (on a shared store, the claim loop takes them)."""
        pub = self.rt.publisher
        for session_id, event, body in settled.appends:
            pub.publish_append(session_id, event, body)
        for session in settled.sessions:
            pub.publish_session(session)
        for run in settled.runs:
            pub.publish_run(runs_q.public(run))
        for run, entry in settled.journal:
            pub.publish_journal(run, entry)
        for run in settled.woken:
            if "sessionId" in run:
                self.rt.kick(run["sessionId"])
        for publish in settled.after:   # what the ended runs started (run-completed triggers)
            publish()

    # -- parking a turn ----------------------------------------------------------------------
    async def park_turn(self, run: dict, agent: dict, park: ParkRequest, worker) -> dict | None:  # noqa: ANN001
        """The turn of `run` (running here) parks: its delegate calls become children and it
        waits for them (or for its event wait), in one transaction. Returns the parked run, or
        None when nothing was written (the run was ended or its lease lost meanwhile). A turn
        whose children all ended before it could park goes straight back to the queue."""
        rt = self.rt
        now = rt.now_ms()
        still_ours = rt.queue.still_ours(run)
        session_id = run["sessionId"]
        limits = turns.TurnLimits.from_config(rt.config)

        def job(conn):
            if worker.gone:
                return None
            current = parking.lock_run(conn, run["id"])
            if current is None or current["status"] != "running":
                return None
            if still_ours is not None and not still_ours(conn):
                return None
            out = Settled()
            spawned = turns.Effects()
            calls: list[str] = []
            children = delegation_q.child_count(conn, session_id)
            left = delegation_q.tokens_left(delegation_q.budget_of(conn, run["id"]), current,
                                            rt.config.max_run_tokens)
            # Each child of this reply gets an equal share of what the run has left, the run
            # keeping one share for itself; the shares are reserved on it until the children end.
            share = left // (len(park.delegations) + 1)
            step = plans.running_step(sessions_q.get_plan(conn, session_id))   # what the children serve
            reserved = 0
            for d in park.delegations:
                refusal = None
                if current["depth"] + 1 > delegation_q.MAX_DEPTH:
                    refusal = f"delegation is at most {delegation_q.MAX_DEPTH} levels deep; do this work yourself"
                elif children >= delegation_q.MAX_CHILDREN_PER_SESSION:
                    refusal = (f"a session has at most {delegation_q.MAX_CHILDREN_PER_SESSION} children; "
                               "do the rest yourself")
                exists = refusal is None and runs_q.child_of_call(conn, run["id"], d.tool_call_id) is not None
                if refusal is None and not exists and d.spec.get("agentId") is not None \
                        and agents_q.agent_account(conn, d.spec["agentId"]) != current["account"]:
                    # (another account's agent is not there, in the words a missing one gets)
                    refusal = (f"there is no agent {d.spec['agentId']} among your account's agents; delegate "
                               "without agentId, or name one of them")
                if refusal is None and not exists and share < delegation_q.MIN_CHILD_TOKENS:
                    refusal = (f"this run has {left} tokens left of its token budget (--max-run-tokens), too few "
                               f"to give a child its share (at least {delegation_q.MIN_CHILD_TOKENS}); do this work "
                               "yourself, or finish")
                if refusal is None and not exists:
                    try:
                        child = delegation_q.spawn_child(
                            conn, current, session_id, child_session_id=new_id(), child_run_id=new_id(),
                            tool_call_id=d.tool_call_id, title=d.title, brief=d.brief, spec=d.spec, now=now,
                            event_ids=(new_id(), new_id()), budget={"tokens": share}, limits=limits,
                            step=step, source=d.script)
                    except (ProtocolError, Refused) as exc:   # the account's runs in flight, the tree's size
                        refusal = exc.message
                    else:
                        children += 1
                        reserved += share
                        spawned.merge(child.effects)
                        out.journal.append((current, journal_q.append(
                            conn, run["id"], {"kind": "call", "tool": "delegate", "toolCallId": d.tool_call_id,
                                              "input": d.spec, "runId": child.run["id"],
                                              "sessionId": child.session["id"]}, now)))
                if refusal is not None:
                    out.appends.extend(refused(conn, session_id, d.tool_call_id, refusal, now).appended)
                    continue
                calls.append(d.tool_call_id)
            if reserved:
                delegation_q.reserve(conn, run["id"], reserved)
            for entry in park.journal or ():
                out.journal.append((current, journal_q.append(conn, run["id"], entry, now)))
            if park.wait is not None and park.wait["reason"] == "children":   # a workflow's children
                wait, match = {**park.wait, "toolCallIds": parking.live_children_of_calls(
                    conn, run["id"], park.wait["toolCallIds"])}, None
            elif park.wait is not None:
                wait, match = park.wait, park.match
            else:
                wait, match = {"reason": "children",
                               "toolCallIds": parking.live_children_of_calls(conn, run["id"], calls)}, None
            if wait["reason"] == "children" and not wait["toolCallIds"]:
                moved = runs_q.move_run(conn, current, "queued", now)   # nothing left to wait for
                out.woken.append(moved)
            else:
                moved = parking.park(conn, current, wait, now, match=match)
                entry = {"kind": "wait", "reason": wait["reason"]}
                if wait["reason"] == "children":
                    entry["toolCallIds"] = wait["toolCallIds"]
                else:
                    entry.update({k: wait[k] for k in ("waitId", "timeoutAt", "label") if wait.get(k) is not None})
                    if match:
                        entry["match"] = match
                out.journal.append((moved, journal_q.append(conn, run["id"], entry, now)))
            out.runs.append(moved)
            try:
                out.sessions.append(sessions_q.set_session_status(
                    conn, session_id, runs_q.session_status_from_runs(conn, session_id), now))
                a = agents_q.set_agent_status(conn, agent["id"], "idle", now)
            except NotFound:
                return None
            return out, spawned, moved, a

        done = await rt.db.write(job)
        rt.queue.release(run)
        if done is None:
            return None
        settled, spawned, moved, a = done
        pub = rt.publisher
        turns.publish(pub, rt.kick, spawned)   # the children: sessions, briefs, runs, kicked
        self.publish(settled)
        pub.publish_agent(a)
        if moved["status"] == "waiting":
            self.arm(parking.wake_time({**park.wait} if park.wait else {"reason": "children"}))
        return moved


def woken(moved: dict, entry: dict | None) -> Settled:
    """What a wake settled: the run back in the queue, its journal entry, and the tool_result
    answering the call that opened the wait (seed_agents.server.store.parking.wake)."""
    answer = moved.pop("_answer", None)
    settled = Settled(runs=[moved], woken=[moved])
    if entry is not None:
        settled.journal.append((moved, entry))
    if answer is not None:
        settled.appends.append(answer)
    return settled


def refused(conn, session_id: str, call_id: str, message: str, now: int):  # noqa: ANN001
    """A delegate call over a limit: answered at once with an error `tool_result` (recorded as
    every tool result is, server/tools/records.py; the sentence is ours and short, never cut)."""
    payload = records.result_event(call_id, "delegate", ToolResult(error=message), "agent", len(message))
    return tool_events.record(conn, session_id, [payload], now, new_id)

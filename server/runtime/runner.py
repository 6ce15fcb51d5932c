"""Durable runs: the runs table is the queue.

One worker per session executes that session's runs one at a time, oldest first; sessions run
concurrently. A run's provider call happens outside any transaction; its reply lands in one
transaction with the run's final status, so a crash either keeps the reply and the success or
neither, and at start the runs a dead process left running are queued again.
"""
from __future__ import annotations

import asyncio
import logging
import time

import httpx

from protocol.blocks import system_prompt_markdown
from server.app import new_id
from server.providers.base import ProviderError, TextDelta, Usage
from server.handlers.provider_lookup import provider_for
from server.providers.network import NetworkPolicy, provider_client
from server.runtime.history import SessionHistory
from server.store import agents as agents_q
from server.store import events as events_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q

log = logging.getLogger("seed_agents.runtime")

# The model sees at most this many of the session's latest events (ending with the turn's own
# user message): a long session must not make every turn decode its whole history.
HISTORY_EVENTS = 500
HISTORY_SESSIONS = 256   # sessions whose history stays in memory between turns (least recent dropped)


def running_info(queued: dict, now: int) -> dict:
    """The RunInfo that `begin` writes, computed here so the turn need not wait for it."""
    info = {k: v for k, v in queued.items() if k not in ("accountId", "userEventId", "error")}
    info.update(status="running", attempt=queued["attempt"] + 1, updatedAt=max(queued["updatedAt"], now))
    return info


class Runtime:
    def __init__(self, app) -> None:
        self.app = app
        self.workers: dict[str, asyncio.Task] = {}
        self.live: dict[str, tuple[str, asyncio.Task]] = {}   # session id -> (run id, task)
        self.stopped_runs: set[str] = set()
        self.histories: dict[str, SessionHistory] = {}   # insertion order = least recent first
        self.http: httpx.AsyncClient | None = None
        self.closing = False

    async def start(self) -> None:
        config = self.app.config
        self.http = provider_client(NetworkPolicy.for_server(config.provider_networks, config.host))
        now = self.app.now_ms()

        def recover(conn):
            # Whatever a dead process left half-done: its running runs go back to the queue, and
            # statuses are recomputed from the runs, so no session stays 'streaming' for nothing.
            runs_q.requeue_interrupted(conn, now)
            agents_q.settle_running_agents(conn, now)
            for session_id in sessions_q.ids_with_status(conn, "streaming"):
                sessions_q.set_session_status(conn, session_id, runs_q.session_status_from_runs(conn, session_id), now)

        await self.app.db.write(recover)
        for run in self.app.db.read(runs_q.queued_runs, 100_000):
            self.kick(run["sessionId"])

    async def stop(self) -> None:
        self.closing = True
        tasks = list(self.workers.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.http is not None:
            await self.http.aclose()

    # -- scheduling ------------------------------------------------------------------------
    def kick(self, session_id: str) -> None:
        if self.closing or session_id in self.workers:
            return
        self.workers[session_id] = asyncio.create_task(self._worker(session_id), name=f"runs:{session_id}")

    async def _worker(self, session_id: str) -> None:
        try:
            while not self.closing:
                runs = self.app.db.read(runs_q.queued_runs_of_session, session_id, 1)
                if not runs:
                    break  # no await between this read and leaving the table below
                await self._execute(runs[0])
        finally:
            if self.workers.get(session_id) is asyncio.current_task():
                del self.workers[session_id]

    async def stop_session(self, session_id: str) -> None:
        """StopSession: cancel the queued runs and the live one; the session ends idle."""
        now = self.app.now_ms()

        def job(conn):
            canceled = runs_q.cancel_queued_runs_of_session(conn, session_id, now)
            status = runs_q.session_status_from_runs(conn, session_id)
            live = self.live.get(session_id)
            if live is not None and status == "streaming":
                status = "idle"  # the live run is being canceled right now
            return canceled, sessions_q.set_session_status(conn, session_id, status, now)

        canceled, session = await self.app.db.write(job)
        for run in canceled:
            self.app.publish_change("runs/" + run["id"], run)
        self.app.publish_change("sessions/" + session_id, session)
        live = self.live.get(session_id)
        if live is not None:
            run_id, task = live
            self.stopped_runs.add(run_id)
            task.cancel()

    # -- one run ---------------------------------------------------------------------------
    async def _execute(self, run: dict) -> None:
        app = self.app
        run_id, session_id = run["id"], run["sessionId"]
        user_event_id = run.get("userEventId", "")
        started = time.perf_counter()
        now = app.now_ms()

        def begin(conn):
            runs_q.set_run_status(conn, run_id, "running", now, attempt_inc=True)
            agents_q.set_agent_status(conn, run["agentId"], "running", now)

        # Registered as live before the first await, so a StopSession arriving at any point
        # of this run finds it and cancels it.
        self.live[session_id] = (run_id, asyncio.current_task())
        agent = app.db.read(agents_q.get_agent, run["agentId"])
        text_parts: list[str] = []
        usage: Usage | None = None
        definition = agent["definition"]
        provider_type = None
        try:
            # Not waited for: the turn goes on while it commits (the writer keeps order, so it
            # lands before the reply). If the process dies first, the run is still 'queued' in
            # the file and simply runs again at start, as a 'running' one would.
            app.db.write_nowait(begin)
            run = running_info(run, now)
            agent = {**agent, "status": "running", "updatedAt": max(agent["updatedAt"], now)}
            app.publish_change("runs/" + run_id, run)
            app.publish_change("agents/" + agent["id"], agent)
            provider, provider_type = self._provider_for(agent)
            messages = self._history(session_id, definition, user_event_id,
                                     include_context=provider_type != "echo")
            async for item in provider.stream(definition.get("model", ""), messages):
                if isinstance(item, TextDelta):
                    if item.text:
                        text_parts.append(item.text)
                        app.publish_partial(session_id, run_id, {"textDelta": item.text})
                elif isinstance(item, Usage):
                    usage = item
            outcome = ("succeeded", None)
        except asyncio.CancelledError:
            if run_id not in self.stopped_runs:
                raise  # shutdown: the run stays 'running' in the file and is requeued at start
            self.stopped_runs.discard(run_id)
            outcome = ("canceled", None)
        except ProviderError as exc:
            outcome = ("failed", exc.message)
        except Exception as exc:  # a bug in a provider must not wedge the session
            log.exception("run %s failed", run_id)
            outcome = ("failed", f"internal error while running the model: {type(exc).__name__}")
        finally:
            if self.live.get(session_id, (None,))[0] == run_id:
                del self.live[session_id]
        done_patch: dict = {"done": True}
        if usage is not None and outcome[0] == "succeeded":
            done_patch["usage"] = usage.to_wire()
        app.publish_partial(session_id, run_id, done_patch)
        await self._finish(run, agent, provider_type, outcome, "".join(text_parts), usage, started)

    def _provider_for(self, agent: dict):
        name = agent["definition"].get("modelProvider", "echo")
        provider = provider_for(self.app, agent["account"], name)
        return provider, provider.name

    def _history(self, session_id: str, definition: dict, user_event_id: str, *, include_context: bool):
        history = self.histories.pop(session_id, None)   # re-inserted below: most recent last
        if history is None:
            history = SessionHistory(HISTORY_EVENTS)
            first = max(0, self.app.db.read(events_q.last_seq, session_id) - HISTORY_EVENTS)
            history.last_seq = first
        while True:   # only what was appended since this session's last turn
            events = self.app.db.read(events_q.events_after, session_id, history.last_seq, 1000)
            history.extend(events)
            if len(events) < 1000:
                break
        self.histories[session_id] = history
        while len(self.histories) > HISTORY_SESSIONS:
            self.histories.pop(next(iter(self.histories)))
        if user_event_id and not history.has(user_event_id):
            # A run so far behind that its message fell out of the window: read it alone.
            seq = self.app.db.read(events_q.event_seq, user_event_id)
            if seq is not None:
                own = SessionHistory(1)
                own.extend(self.app.db.read(events_q.events_after, session_id, seq - 1, 1))
                history = history.with_entry(own.entries[0]) if own.entries else history
        return history.messages(system_prompt_markdown(definition), user_event_id,
                                include_context=include_context)

    async def _finish(self, run, agent, provider_type, outcome, text, usage, started) -> None:
        app = self.app
        status, err = outcome
        run_id, session_id = run["id"], run["sessionId"]
        now = app.now_ms()
        definition = agent["definition"]

        def job(conn):
            appended = None
            if status == "succeeded":
                meta: dict = {"provider": provider_type or definition.get("modelProvider", ""),
                              "model": definition.get("model", ""),
                              "durationMs": int((time.perf_counter() - started) * 1000)}
                if usage is not None:
                    meta["usage"] = usage.to_wire()
                payload = {"type": "message", "role": "assistant", "content": text, "meta": meta}
                appended = events_q.append_event(conn, session_id, payload, new_id(), now)
            elif status == "failed":
                appended = events_q.append_event(conn, session_id, {"type": "error", "message": err}, new_id(), now)
            r = runs_q.set_run_status(conn, run_id, status, now, error=err)
            session_status = runs_q.session_status_from_runs(conn, session_id)
            session = sessions_q.set_session_status(conn, session_id, session_status, now)
            agent_status = "error" if status == "failed" else "idle"
            a = agents_q.set_agent_status(conn, agent["id"], agent_status, now)
            return appended, r, session, a

        appended, r, session, a = await app.db.write(job)
        app.metrics.runs.labels(status).inc()
        if appended is not None:
            event, body = appended
            app.publish_append(session_id, event, body)
        app.publish_change("runs/" + run_id, r)
        app.publish_change("sessions/" + session_id, session)
        app.publish_change("agents/" + a["id"], a)
        app.notify_account(a["account"], "session-event", agent_id=a["id"], session_id=session_id)

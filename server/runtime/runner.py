"""Durable runs: the runs table is the queue.

One worker per session executes that session's runs one at a time, oldest first; sessions run
concurrently. A run's provider call happens outside any transaction; its reply lands in one
transaction with the run's final status, so a crash either keeps the reply and the success or
neither, and at start the runs a dead process left running are queued again.

Run statuses move only through `runs.transition`; the RunInfo a turn publishes is the one it
writes. Writes that end a run are conditional on its status (`runs.save_run`), so a run that a
CancelRun, StopSession or deletion already ended keeps that ending: the turn writes no reply for
it, and for a deleted session it writes and publishes nothing at all.
"""
from __future__ import annotations

import asyncio
import logging
import time

import httpx

from protocol.blocks import system_prompt_markdown
from server.app import new_id
from protocol.errors import quote
from server.providers.base import ProviderError, ProviderNotFound, TextDelta, Usage
from server.handlers.provider_lookup import provider_for
from server.providers.network import NetworkPolicy, provider_client
from server.runtime.history import SessionHistory
from server.store import agent_lifecycle as lifecycle_q
from server.store import agents as agents_q
from server.store import events as events_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q
from server.store.errors import NotFound
from server.runtime.state_dirs import reconcile_state_dirs

log = logging.getLogger("seed_agents.runtime")

# The model sees at most this many of the session's latest events (ending with the turn's own
# user message): a long session must not make every turn decode its whole history.
HISTORY_EVENTS = 500




def run_error(code: str, message: str) -> dict:
    return {"code": code, "message": message}


class Runtime:
    def __init__(self, app) -> None:
        self.app = app
        self.workers: dict[str, asyncio.Task] = {}
        self.live: dict[str, tuple[str, asyncio.Task]] = {}   # session id -> (run id, task)
        self.stopped_runs: set[str] = set()
        # Sessions deleted while their worker lived: the worker publishes and writes nothing
        # more for them, and ends (removed when the worker ends).
        self.gone: set[str] = set()
        self.histories = app.cache["history"]   # bounded in bytes (--history-cache-bytes)
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
        ids, dirs = self.app.db.read(lambda conn: (lifecycle_q.agent_ids(conn), lifecycle_q.state_dirs(conn)))
        await asyncio.to_thread(reconcile_state_dirs, self.app.config.data_dir, ids, dirs)
        for run in self.app.db.read(runs_q.queued_runs, 100_000):
            if "sessionId" in run:
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
            while not self.closing and session_id not in self.gone:
                runs = self.app.db.read(runs_q.queued_runs_of_session, session_id, 1)
                if not runs:
                    break  # no await between this read and leaving the table below
                await self._execute(runs[0])
        finally:
            if self.workers.get(session_id) is asyncio.current_task():
                del self.workers[session_id]
                self.gone.discard(session_id)

    def publish_runs(self, runs: list[dict]) -> None:
        for run in runs:
            self.app.publish_change("runs/" + run["rootRunId"], runs_q.public(run))

    def interrupt(self, run_ids) -> None:
        """Cancel the turns executing these runs (their rows were already ended by the caller)."""
        wanted = set(run_ids)
        for run_id, task in list(self.live.values()):
            if run_id in wanted:
                self.stopped_runs.add(run_id)
                task.cancel()

    async def stop_session(self, session_id: str) -> bool:
        """StopSession: cancel the session's queued runs and its live one; the session ends
        idle. True when a run was live or queued."""
        now = self.app.now_ms()

        def job(conn):
            canceled = runs_q.cancel_runs(conn, runs_q.active_runs_of_session(conn, session_id), now)
            status = runs_q.session_status_from_runs(conn, session_id)
            return canceled, sessions_q.set_session_status(conn, session_id, status, now)

        canceled, session = await self.app.db.write(job)
        self.publish_runs(canceled)
        self.app.publish_change("sessions/" + session_id, session)
        self.interrupt(r["id"] for r in canceled)
        return bool(canceled)

    def abandon_sessions(self, session_ids) -> None:
        """The sessions are being deleted: their workers publish nothing more, and a live turn is
        canceled (its final write then finds the session gone and writes nothing)."""
        ids = set(session_ids)
        self.gone.update(sid for sid in ids if sid in self.workers)
        for session_id in ids:
            live = self.live.get(session_id)
            if live is not None:
                self.stopped_runs.add(live[0])
                live[1].cancel()

    # -- one run ---------------------------------------------------------------------------
    async def _execute(self, run: dict) -> None:
        app = self.app
        run_id, session_id = run["id"], run["sessionId"]
        user_event_id = run.get("userEventId", "")
        started = time.perf_counter()
        now = app.now_ms()

        running = runs_q.transition(run, "running", now)
        before, agent_id = run["status"], run["agentId"]

        def begin(conn):
            if runs_q.save_run(conn, before, running):
                agents_q.set_agent_status(conn, agent_id, "running", now)

        # Registered as live before the first await, so a StopSession arriving at any point
        # of this run finds it and cancels it.
        self.live[session_id] = (run_id, asyncio.current_task())
        agent = app.db.read(agents_q.get_agent, run["agentId"])
        if agent is None:  # deleted between the queue read and now: its runs went with it
            del self.live[session_id]
            return
        text_parts: list[str] = []
        usage: Usage | None = None
        definition = agent["definition"]
        provider_type = None
        model = definition.get("model", "")
        gone = self.gone
        try:
            # Not waited for: the turn goes on while it commits (the writer keeps order, so it
            # lands before the reply). If the process dies first, the run is still 'queued' in
            # the file and simply runs again at start, as a 'running' one would.
            app.db.write_nowait(begin)
            run = running
            agent = {**agent, "status": "running", "updatedAt": max(agent["updatedAt"], now)}
            app.publish_change("runs/" + run["rootRunId"], runs_q.public(run))
            app.publish_change("agents/" + agent["id"], agent)
            provider, provider_type, model = self._provider_for(agent, run.get("modelOverride"))
            messages = self._history(session_id, definition, user_event_id,
                                     include_context=provider_type != "echo")
            async for item in provider.stream(model, messages):
                if isinstance(item, TextDelta):
                    if item.text and session_id not in gone:
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
            outcome = ("failed", run_error("provider-error", exc.message))
        except Exception as exc:  # a bug in a provider must not wedge the session
            log.exception("run %s failed", run_id)
            outcome = ("failed", run_error("internal-error",
                                           f"internal error while running the model: {type(exc).__name__}"))
        finally:
            if self.live.get(session_id, (None,))[0] == run_id:
                del self.live[session_id]
        if session_id in gone:
            return  # deleted meanwhile: nothing more is written or published for it
        done_patch: dict = {"done": True}
        if usage is not None and outcome[0] == "succeeded":
            done_patch["usage"] = usage.to_wire()
        app.publish_partial(session_id, run_id, done_patch)
        await self._finish(run, agent, provider_type, model, outcome, "".join(text_parts), usage, started)

    def _provider_for(self, agent: dict, override: dict | None = None):
        """(provider, its type, model) for a turn: the session's model override while its
        provider exists, else the agent's definition."""
        definition = agent["definition"]
        name, model = definition.get("modelProvider", "echo"), definition.get("model", "")
        if override is not None:
            try:
                provider = provider_for(self.app, agent["account"], override["provider"])
                return provider, provider.name, override["model"]
            except ProviderNotFound:
                pass   # the override's provider was deleted: the agent's own is used
        try:
            provider = provider_for(self.app, agent["account"], name)
        except ProviderNotFound:
            raise ProviderError(f"model provider {quote(name)} is not configured for this account "
                                "(it was deleted, or never set): set it again with "
                                "SetModelProvider or pick another provider for the agent") from None
        return provider, provider.name, model

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
        self.histories.put(session_id, history, history.bytes)
        if user_event_id and not history.has(user_event_id):
            # A run so far behind that its message fell out of the window: read it alone.
            seq = self.app.db.read(events_q.event_seq, user_event_id)
            if seq is not None:
                own = SessionHistory(1)
                own.extend(self.app.db.read(events_q.events_after, session_id, seq - 1, 1))
                history = history.with_entry(own.entries[0]) if own.entries else history
        return history.messages(system_prompt_markdown(definition), user_event_id,
                                include_context=include_context)

    async def _finish(self, run, agent, provider_type, model, outcome, text, usage, started) -> None:
        app = self.app
        status, err = outcome
        run_id, session_id = run["id"], run["sessionId"]
        now = app.now_ms()
        definition = agent["definition"]
        usage_wire = None if usage is None else usage.to_wire()
        ended = runs_q.transition(run, status, now, error=err, usage=usage_wire)
        gone = self.gone

        def job(conn):
            if session_id in gone:
                return None  # deleted: write nothing
            wrote = runs_q.save_run(conn, "running", ended)
            appended = titled = None
            if wrote and status == "succeeded":
                meta: dict = {"provider": provider_type or definition.get("modelProvider", ""),
                              "model": model,
                              "durationMs": int((time.perf_counter() - started) * 1000)}
                if usage_wire is not None:
                    meta["usage"] = usage_wire
                payload = {"type": "message", "role": "assistant", "content": text, "meta": meta}
                appended = events_q.append_event(conn, session_id, payload, new_id(), now)
            elif wrote and status == "failed":
                appended = events_q.append_event(conn, session_id, {"type": "error", "message": err["message"]},
                                                 new_id(), now)
            # else: a cancel or a deletion ended the run first; its ending stands.
            try:
                session = sessions_q.set_session_status(conn, session_id,
                                                        runs_q.session_status_from_runs(conn, session_id), now)
            except NotFound:
                return None  # the session was deleted meanwhile
            if appended is not None and status == "succeeded" and "title" not in session:
                titled = self._auto_title(conn, session_id, now)
            try:
                a = agents_q.set_agent_status(conn, agent["id"], "error" if wrote and status == "failed" else "idle",
                                              now)
            except NotFound:
                a = None
            return appended, ended if wrote else None, titled or session, a

        done = await app.db.write(job)
        app.metrics.runs.labels(status).inc()
        if done is None or session_id in gone:
            return
        appended, r, session, a = done
        if appended is not None:
            event, body = appended
            app.publish_append(session_id, event, body)
        if r is not None:
            app.publish_change("runs/" + r["rootRunId"], runs_q.public(r))
        app.publish_change("sessions/" + session_id, session)
        if a is not None:
            app.publish_change("agents/" + a["id"], a)
            app.notify_account(a["account"], "session-event", agent_id=a["id"], session_id=session_id)

    @staticmethod
    def _auto_title(conn, session_id: str, now: int) -> dict | None:
        """After the first reply: the first line of the first user message (CONTRACT section 4)."""
        for event in events_q.events_after(conn, session_id, 0, 50):
            payload = event["event"]
            if payload.get("type") == "message" and payload.get("role") == "user":
                title = sessions_q.title_from_text(payload.get("content") or "")
                return sessions_q.auto_title(conn, session_id, title, now) if title else None
        return None

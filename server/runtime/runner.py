"""Durable runs: the runs table is the queue.

One worker per session executes that session's runs one at a time, oldest first; sessions run
concurrently. A run's provider call happens outside any transaction; its reply lands in one
transaction with the run's final status, so a crash either keeps the reply and the success or
neither, and at start the runs a dead process left running are queued again.

How runs reach the workers is the scheduling strategy's (`RunQueue`, server/runtime/scheduling.py),
chosen once in `Runtime.__init__` from the store's traits: `LocalQueue` when one process owns
the store, `LeasedQueue` when several servers share it. This module is the turn, the same for
both: it asks the queue whether the run is still held, for the check that guards each write
(`still_ours`), and to release the run when its turn is over.

Run statuses move only through `runs.transition`; the RunInfo a turn publishes is the one it
writes. Writes that end a run are conditional on its status (`runs.save_run`), so a run that a
CancelRun, StopSession or deletion already ended keeps that ending: the turn writes no reply for
it, and for a deleted session it writes and publishes nothing at all.

With leases (server/runtime/leased_queue.py) a run's ending is written only while this server
still holds its lease, so each run is answered once; a turn whose lease is lost is canceled and
its result dropped.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

from seed_agents.protocol.agent import plans
from seed_agents.protocol.hm.blocks import system_prompt_markdown
from seed_agents.protocol.wire.errors import quote
from seed_agents.protocol.agent.providers import BUILTIN_PROVIDER, BUILTIN_TYPES

from ..cache import ByteBudgetCache
from ..clock import new_id
from ..config import Config
from ..hypermedia.client import HmClient
from ..operations.metrics import Metrics
from ..operations.turn_timing import CLAIMED, DURABLE, TurnTimings
from ..providers.base import ProviderError, ProviderNotFound, Usage
from ..providers.capabilities import accepts_images
from ..providers.network import NetworkPolicy, provider_client
from .subscription_tokens import SubscriptionTokens
from ..providers.outbound_slots import AccountSlots
from ..providers.registry import ProviderSettings
from ..publisher import Publisher
from ..sandbox.choose import check as check_sandbox
from ..sandbox.choose import sandbox_for
from ..sandbox.port import Sandbox
from ..database.port import Storage
from ..store import agent_lifecycle as lifecycle_q
from ..store import agents as agents_q
from ..store import delegation as delegation_q
from ..store import events as events_q
from ..store import memory as memory_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from ..store import visitors as visitors_q
from ..store.errors import NotFound
from ..store.journal import JournalFull
from ..store.secrets import SecretBox
from ..tools.context import Park
from ..tools.code_tools import CodeExec
from ..tools.delegation_tools import Delegating, event_wait
from ..tools.surface import ToolSurface
from ..tools.trigger_tools import TriggerAdmin
from ..tools.web import WebAccess
from .attachment_view import AttachmentView
from .history import SessionHistory
from .leased_queue import LeasedQueue
from .leasing import RunLeases
from .local_queue import LocalQueue
from .parked import ParkedRuns, ParkRequest
from .preamble import Preambles
from .provider_lookup import ProviderLookup
from .scheduling import RunQueue, SessionWorker
from .state_dirs import reconcile_state_dirs
from .titling import Titler
from .tool_context import Entry, build_surface
from .tool_loop import Budgets, BudgetSpent, ToolLoop, TurnGone
from .workflows import WorkflowRun, continue_as_new

log = logging.getLogger("seed_agents.runtime")

# The model sees at most this many of the session's events up to the turn's own user message
# (and as many after it: replies to earlier turns, its own steps): a long session must not make
# every turn decode its whole history.
HISTORY_EVENTS = 500
HISTORY_PAGE = 1000   # events read at once into a history
# Connections each outbound pool may hold at once (start() makes one pool per purpose).
PROVIDER_CONNECTIONS, HM_CONNECTIONS, WEB_CONNECTIONS, DOWNLOAD_CONNECTIONS = 100, 20, 100, 50


@dataclass(slots=True)
class _TurnRows:
    """What a turn reads of its own rows before its first model step (`_turn_rows`)."""
    persona: dict | None     # a delegate call's input (a child run)
    visitor: str | None      # the session's visitor (public chat), for a top-level run
    budget: dict             # the run's share of its tree's budget (store/delegation.budget_of)
    reserved: int | None     # a visitor run's token reservation
    upto: int | None         # the seq of the message the turn answers (None: none, or gone)


def _turn_statements(run: dict, session_id: str, user_event_id: str) -> list[tuple[str, tuple]]:
    """What a turn reads of its own rows, none depending on another's answer: one round trip
    where each statement would be one (`aread_each`; docs/performance.md, "A turn on PostgreSQL")."""
    run_id = run["id"]
    return [(delegation_q.BUDGET_ROW, (run_id,)), (delegation_q.INPUT_ROW, (run_id,)),
            (visitors_q.VISITOR_ROW, (session_id,)), (visitors_q.RESERVED_ROW, (run_id,)),
            (events_q.SEQ_ROW, (user_event_id or "",))]


def _turn_rows(run: dict, found: list[list[tuple]], user_event_id: str) -> _TurnRows:
    budget_rows, input_rows, visitor_rows, reserved_rows, seq_rows = found
    child = "parentRunId" in run
    budget = delegation_q.budget_from(budget_rows)
    return _TurnRows(persona=delegation_q.input_from(input_rows) if child else None,
                     visitor=None if child else visitors_q.first_value(visitor_rows),
                     budget=budget,
                     reserved=None if budget or child else visitors_q.first_value(reserved_rows),
                     upto=visitors_q.first_value(seq_rows) if user_event_id else None)


def run_error(code: str, message: str) -> dict:
    return {"code": code, "message": message}


@dataclass(slots=True)
class TurnResult:
    """How one turn ended, and what it produced."""

    status: str                      # succeeded | failed | canceled
    started: float                   # perf_counter() at the turn's start
    provider_type: str | None = None
    model: str = ""
    text: str = ""
    usage: Usage | None = None       # the run's, all model steps
    error: dict | None = None        # {code, message} when failed
    step_usage: Usage | None = None  # the model step that wrote the final message
    message_started: float = 0.0     # perf_counter() since which the final message counts
    unmet: list | None = None        # obligations the run ended owing
    park: Park | None = None         # a tool's answer comes later: the run waits
    delegations: list | None = None  # the turn's delegate calls (server/runtime/parked.py)
    wait: dict | None = None         # the turn's `wait` call (server/tools/delegation_tools.py)
    output: object = None            # a typed child's result (return_result's), else {text} is recorded
    stopped: dict | None = None      # what the log gets if the turn is stopped (ToolLoop.stopped_message)
    spent: int | None = None         # the run's tokens as its budget counts them, all its turns
    park_request: ParkRequest | None = None   # a workflow parks (server/runtime/workflows.py)
    successor: dict | None = None    # a workflow continued as this new run (ctx.continueAsNew)


class Runtime:
    def __init__(self, db: Storage, config: Config, metrics: Metrics, publisher: Publisher,
                 box: SecretBox, now_ms: Callable[[], int], histories: ByteBudgetCache) -> None:
        self.db = db
        self.config = config
        self.metrics = metrics
        # --turn-timings: each MessageSession turn's phases (server/operations/turn_timing.py);
        # None when off, and every mark below is then one test.
        self.timings = TurnTimings(metrics.registry) if config.turn_timings else None
        self.publisher = publisher
        self.box = box
        self.now_ms = now_ms
        self.workers: dict[str, SessionWorker] = {}
        self.histories = histories   # bounded in bytes (--history-cache-bytes)
        # (user event id, its seq) read with the starting turn's rows: its history's first read
        self.known_seq: tuple[str, int | None] = ("", None)
        # What each agent's preamble lists (server/runtime/preamble.py), bounded by --prompt-cache-bytes.
        self.preambles = Preambles(self, ByteBudgetCache("preambles", config.prompt_cache_bytes))
        self.titler = Titler(self)   # session titles from a small model call (server/runtime/titling.py)
        self.http: httpx.AsyncClient | None = None      # the providers' pool
        self.hm_http: httpx.AsyncClient | None = None   # the HM server's pool
        self.download_http: httpx.AsyncClient | None = None   # DownloadAgentMemoryFile's pool
        self.download_slots: AccountSlots | None = None  # one account's web fetches at once
        self.providers: ProviderLookup | None = None   # set in start(), with the HTTP client
        self.web: WebAccess | None = None               # the web tools' access, set in start()
        self.hm: HmClient | None = None                 # the agents' hm:// tools, when there is an HM server
        self.sandbox: Sandbox | None = None             # server/sandbox/: chosen in start()
        self._code: CodeExec | None = None
        self.sandbox_check: asyncio.Task | None = None
        self.budgets = Budgets.from_config(config)
        self.closing = False
        # The scheduling strategy, chosen here once; the rest of the runtime never asks which.
        self.queue: RunQueue = (
            LeasedQueue(self, RunLeases(db, now_ms, config.run_lease, config.run_poll_interval))
            if db.traits.run_leases else LocalQueue(self))
        self.parked = ParkedRuns(self)   # parked runs: their clock, signals, parking a turn
        # (conn, ended RunInfo) -> publications: called inside the transaction that ends a run
        # (server/triggers/service.py: run-completed triggers fire in it, exactly once); set by
        # the composition root through `on_run_end`.
        self.run_ended: Callable | None = None
        # The trigger tools' port (server/tools/trigger_tools.TriggerAdmin), given by the
        # composition root (server/app.py) once the triggers are built; None: no trigger tools.
        self.trigger_admin: TriggerAdmin | None = None

    async def start(self) -> None:
        config = self.config
        # A connection pool per purpose, so one purpose's slow peers never hold what another
        # waits for: providers and the HM server under --provider-networks; the web tools and
        # downloads under --web-networks (public only unless the operator says otherwise), one
        # account's fetches at once bounded by --web-fetches-per-account across both.
        providers = NetworkPolicy.for_server(config.provider_networks, config.host)
        web = NetworkPolicy.for_web(config.web_networks)
        self.http = provider_client(providers, PROVIDER_CONNECTIONS)
        self.hm_http = provider_client(providers, HM_CONNECTIONS)
        self.download_http = provider_client(web, DOWNLOAD_CONNECTIONS)
        self.download_slots = AccountSlots(config.web_fetches_per_account)
        self.metrics.watch_web(self.download_slots)
        self.providers = ProviderLookup(self.db, self.box, self.http, ProviderSettings.from_config(config))
        if config.subscription_auth:
            self.providers.subscription = SubscriptionTokens(self.db, self.box, self.http, config, self.now_ms)
            self.providers.subscription_base_url = config.subscription_base_url
        self.web = WebAccess(provider_client(web, WEB_CONNECTIONS), config.tool_fetch_bytes, config.tool_timeout,
                             config.searxng_url, httpx.AsyncClient(timeout=config.tool_timeout, trust_env=False)
                             if config.searxng_url else None, self.download_slots)
        if config.hm_server_url:
            self.hm = HmClient(config.hm_server_url, self.hm_http, timeout=config.hm_server_timeout)
        # The code sandbox, chosen now and offered once its self-check passes (in the background).
        self.sandbox = sandbox_for(config)
        longest = max(1.0, min(300.0, config.tool_timeout - 5))   # --tool-timeout would stop the call
        self._code = CodeExec(self.sandbox, min(longest, config.exec_timeout), memory_q.MemoryLimits(
            quota=config.file_quota_bytes or None, max_files=config.memory_max_files), longest,
            config.max_tool_output_chars)
        self.sandbox_check = asyncio.create_task(check_sandbox(self.sandbox), name="sandbox-check")
        await self.queue.recover()
        ids, dirs = self.db.read(lambda conn: (lifecycle_q.agent_ids(conn), lifecycle_q.state_dirs(conn)))
        await asyncio.to_thread(reconcile_state_dirs, config.data_dir, ids, dirs)
        self.parked.start()
        self.queue.start()

    @property
    def code(self) -> CodeExec | None:
        """What tools run code with, once the sandbox passed its self-check; else None."""
        return self._code if self._code is not None and self._code.runtimes else None

    async def sandbox_checked(self) -> None:
        """A turn that starts while the self-check still runs (right after a start) waits for it,
        so whether `execute` is offered never depends on how fast the server came up."""
        if self.sandbox_check is not None and not self.sandbox_check.done():
            await asyncio.wait({self.sandbox_check})

    async def stop(self) -> None:
        self.closing = True
        if self.sandbox_check is not None:
            self.sandbox_check.cancel()   # (its sandboxes are killed before it ends)
            await asyncio.gather(self.sandbox_check, return_exceptions=True)
        self.parked.stop()
        await self.titler.close()
        tasks = [w.task for w in self.workers.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.queue.stop()
        for client in (self.http, self.hm_http, self.download_http):
            if client is not None:
                await client.aclose()
        if self.web is not None:
            await self.web.http.aclose()
            await self.web.converter.close()
            if self.web.search_http is not None:
                await self.web.search_http.aclose()

    # -- scheduling ------------------------------------------------------------------------
    def kick(self, session_id: str) -> None:
        """A run of the session was queued or woken."""
        if not self.closing:
            self.queue.kick(session_id)

    def claim_in(self, conn, now: int) -> object:  # noqa: ANN001
        """Inside a write job that queued a run: the scheduling strategy takes runs in the same
        transaction where it can (leases: the run is this server's at the commit, with no claim
        pass after it); hand the value to `took` after the commit, in place of a kick."""
        return None if self.closing else self.queue.claim_in(conn, now)

    def took(self, claim: object) -> bool:
        """After the write that ran `claim_in` committed: start what it took; True when the
        write's queued sessions should still be kicked."""
        return self.queue.took(claim)

    # -- RunControl (server/runtime/control.py): what the layers above ask of the runs ----------
    def on_run_end(self, hook: Callable) -> None:
        self.run_ended = hook

    def cancel_in(self, conn, runs: list[dict], now: int):  # noqa: ANN001
        return delegation_q.cancel_subtrees(conn, runs, now, new_id, self.run_ended)

    def settle(self, settled) -> None:  # noqa: ANN001
        self.parked.publish(settled)

    async def signal(self, run_id: str, name: str, payload) -> bool:  # noqa: ANN001
        return await self.parked.signal(run_id, name, payload)

    def parked_elsewhere(self) -> None:
        self.parked.refresh()

    def publish_runs(self, runs: list[dict]) -> None:
        for run in runs:
            self.publisher.publish_run(runs_q.public(run))

    def interrupt_runs(self, run_ids) -> None:
        """Cancel this server's turns of these runs, if it runs any of them: the runs were ended
        (StopSession, CancelRun, a deletion) here or, on a shared store, on another server. A
        claimed run not yet started is dropped too (its lease went with its ending)."""
        wanted = set(run_ids)
        self.queue.forget(wanted)
        for worker in list(self.workers.values()):
            if worker.run_id in wanted:
                worker.stop_turn(worker.run_id)

    async def stop_session(self, session_id: str) -> bool:
        """StopSession: cancel the session's queued runs and its live one; the session ends
        idle. True when a run was live or queued."""
        now = self.now_ms()

        def job(conn):
            canceled, settled = self.cancel_in(conn, runs_q.active_runs_of_session(conn, session_id), now)
            status = runs_q.session_status_from_runs(conn, session_id)
            return canceled, settled, sessions_q.set_session_status(conn, session_id, status, now)

        canceled, settled, session = await self.db.write(job)
        self.publish_runs(canceled)
        self.parked.publish(settled)   # the subtree's sessions, parents told of canceled children
        self.publisher.publish_session(session)
        self.interrupt_runs(r["id"] for r in canceled)
        return bool(canceled)

    def abandon_sessions(self, session_ids) -> None:
        """The sessions are being deleted: their workers publish nothing more, and a live turn is
        canceled (its final write then finds the session gone and writes nothing)."""
        for session_id in set(session_ids):
            worker = self.workers.get(session_id)
            if worker is not None:
                worker.gone = True
                worker.stop_turn()

    # -- one run ---------------------------------------------------------------------------
    async def execute(self, run: dict, worker: SessionWorker, agent: dict | None) -> None:
        """One run, handed over by the queue with its agent (None: deleted meanwhile), in the
        session's worker: queued, or already running under this server's lease."""
        publisher = self.publisher
        run_id, session_id = run["id"], run["sessionId"]
        queue = self.queue

        # Registered as live before the first await, so a StopSession arriving at any point
        # of this run finds it and cancels it.
        worker.run_id = run_id
        if self.timings is not None:
            self.timings.mark(run_id, CLAIMED)
        if agent is None:  # deleted between the queue read and now: its runs went with it
            worker.run_id = None
            queue.release(run)
            return
        definition = agent["definition"]
        result = TurnResult("succeeded", time.perf_counter(), model=definition.get("model", ""))
        if not queue.holds(run):
            # Ended elsewhere (or its lease lost) between the claim and now: no turn at all.
            worker.run_id = None
            result.status = "canceled"
            await self._finish(run, agent, result, worker)
            return
        try:
            run, agent = queue.begin(run, agent)
            publisher.publish_run(runs_q.public(run))
            publisher.publish_agent(agent)
            if run.get("kind") == "workflow":
                await self._workflow(run, agent, worker, result)
            else:
                provider, result.provider_type, result.model = self._provider_for(agent, run.get("modelOverride"))
                if self.timings is not None:
                    provider = self.timings.provider(provider, run_id)
                await self._turn(run, agent, worker, provider, result)
        except BudgetSpent as exc:
            result.status, result.error = "failed", run_error("budget-exceeded", str(exc))
        except TurnGone:
            result.status = "canceled"   # the session went, or the run is no longer this server's
        except JournalFull as exc:   # the storage design's caps: the run ends journal-cap
            result.status, result.error = "failed", run_error("journal-cap", str(exc))
        except asyncio.CancelledError:
            if worker.stopped_run != run_id:
                # Shutdown: the run stays 'running' and the queue recovers it (requeued at the
                # next start, or handed back by the queue's stop()).
                raise
            worker.stopped_run = None
            result.status = "canceled"
        except ProviderError as exc:
            result.status, result.error = "failed", run_error("provider-error", exc.message)
        except Exception as exc:  # a bug in a provider must not wedge the session
            log.exception("run %s failed", run_id)
            result.status, result.error = "failed", run_error(
                "internal-error", f"internal error while running the model: {type(exc).__name__}")
        finally:
            worker.run_id = None
        if worker.gone:
            queue.release(run)   # (its row was ended with the session: a lease went with it)
            return  # deleted meanwhile: nothing more is written or published for it
        done_patch: dict = {"done": True}
        if result.usage is not None and result.status == "succeeded":
            done_patch["usage"] = result.usage.to_wire()
        publisher.publish_partial(session_id, run_id, done_patch)
        if result.park_request is not None:
            await self.parked.park_turn(run, agent, result.park_request, worker)
            return
        if result.successor is not None:   # its place (the parent's delegate call) went to the successor
            run = {k: v for k, v in run.items() if k != "parentToolCallId"}
            await self._finish(run, agent, result, worker)
            self.kick(session_id)
            return
        if result.park is not None and result.status in ("succeeded", "waiting"):
            # A tool's answer comes later (the turn's delegate calls): the run parks, holding no
            # worker, and is woken when its children have ended.
            request = ParkRequest(result.delegations or [])
            if result.wait is not None:   # the turn's `wait` call: parked on a signal
                request.wait, request.match = event_wait(result.wait, self.now_ms())
            await self.parked.park_turn(run, agent, request, worker)
            return
        await self._finish(run, agent, result, worker)

    async def _workflow(self, run: dict, agent: dict, worker: SessionWorker, result: TurnResult) -> None:
        """A script child's run (server/runtime/workflows.py); fills `result` as a turn does."""
        result.provider_type, result.model = "workflow", ""
        outcome = await WorkflowRun(self, run, agent, worker).execute()
        if outcome.status == "succeeded":
            result.output = outcome.output
            result.text = json.dumps(outcome.output, ensure_ascii=False)[:20_000]
        elif outcome.status == "failed":
            result.status, result.error = "failed", outcome.error
        elif outcome.status == "parked":
            result.park_request = ParkRequest([], wait=outcome.wait, match=outcome.match)
        else:   # continued
            successor = await continue_as_new(self, run, outcome.state, worker)
            if successor is None:
                raise TurnGone("the run is no longer this server's")
            result.successor = successor
            result.output = {"continuedAsRunId": successor["id"]}
            result.text = f"Continued as run {successor['id']}."

    def _provider_for(self, agent: dict, override: dict | None = None):
        """(provider, its type, model) for a turn: the session's model override while its
        provider exists, else the agent's definition."""
        definition = agent["definition"]
        name, model = definition.get("modelProvider", BUILTIN_PROVIDER), definition.get("model", "")
        if override is not None:
            try:
                provider = self.providers.provider(agent["account"], override["provider"])
                # The override's level, or none: an override without one means off.
                provider.reasoning_level = override.get("reasoningLevel")
                return provider, provider.name, override["model"]
            except ProviderNotFound:
                pass   # the override's provider was deleted: the agent's own is used
        try:
            provider = self.providers.provider(agent["account"], name)
        except ProviderNotFound:
            raise ProviderError(f"model provider {quote(name)} is not configured for this account "
                                f"(it was deleted, or never set): `seed-agents providers set {name} ...` "
                                "(or the desktop's provider settings) sets it again; over the protocol, send "
                                "SetModelProvider or pick another provider for the agent") from None
        provider.reasoning_level = definition.get("reasoningLevel")
        return provider, provider.name, model

    async def _turn(self, run: dict, agent: dict, worker: SessionWorker, provider, result: TurnResult) -> None:  # noqa: ANN001
        """The run's model steps and tool calls (server/runtime/tool_loop.py); fills `result`."""
        run_id, session_id = run["id"], run["sessionId"]
        user_event_id = run.get("userEventId", "")
        definition = agent["definition"]
        # The built-in echo provider answers exactly (CONTRACT section 4): no tools, no context.
        echo = result.provider_type in BUILTIN_TYPES
        surface = None
        system = system_prompt_markdown(definition)
        # The turn's own rows, read in one go off the loop (on PostgreSQL each was a round trip on
        # the loop's thread). Nothing here decides access: they are the run's (its input, budget,
        # reservation), its session's visitor and its message's seq, fixed before it was queued,
        # except what its tree spent, which moves only while this run is parked. A session
        # deleted during the await is what `worker.gone` and `still_ours` already guard at every
        # write of the turn, as after any of its other awaits.
        start = _turn_rows(run, await self.db.aread_each(_turn_statements, run, session_id, user_event_id),
                           user_event_id)
        persona = start.persona
        if persona and persona.get("prompt"):   # a delegate call's anonymous worker: its prompt, not the agent's
            system = persona["prompt"]
        senders = False   # a shared agent's signed human messages carry <message_sender> blocks
        # A visitor's session (public chat): only the tools the owner granted visitors, and a
        # preamble without the memory, the members or the identities (store/visitors.py).
        visitor = start.visitor
        grants = (agent.get("publicChat") or {}).get("tools") if visitor is not None else None
        if visitor is not None and "publicChat" not in agent:
            raise BudgetSpent("this agent's owner closed public chat: visitor messages are no longer answered")
        if not echo:
            surface = await self._surface(run, agent, grants)
            system, senders = await self.preambles.system_prompt(agent, system, surface, visitor=visitor is not None)

        if not echo:
            await self._retire_settled_plan(session_id, run_id)
        attachments = AttachmentView(self.db.read, session_id, accepts_images(result.provider_type, result.model))

        self.known_seq = (user_event_id, start.upto)   # the message's seq, for _history

        def messages():
            return view(self._history(session_id, user_event_id))

        def view(history: SessionHistory) -> list:
            return history.messages(system, user_event_id, include_context=not echo, run_id=run_id,
                                    attachments=attachments, senders=senders)

        # The history once for both (a second `_history` at once would read again, and find nothing).
        history = self._history(session_id, user_event_id)
        loop = ToolLoop(db=self.db, publisher=self.publisher, now_ms=self.now_ms, run=run, agent=agent,
                        provider=provider, model=result.model, provider_type=result.provider_type,
                        history=history, messages=view(history), surface=surface,
                        budgets=self._budgets_for(run, start), still_ours=self.queue.still_ours(run), gone=lambda: worker.gone,
                        rebuild=messages, metrics=self.metrics)
        try:
            outcome = await loop.run_turn()
        finally:
            result.usage = loop.out.usage   # what the steps used, however the turn ended
            result.spent = loop.spent()
            result.stopped = loop.stopped_message()
        result.text, result.step_usage = outcome.text, outcome.step_usage
        result.message_started, result.unmet, result.park = outcome.message_started, outcome.unmet, outcome.park
        if surface is not None and surface.delegating is not None:
            self._delegation_outcome(surface.delegating, result)

    async def _retire_settled_plan(self, session_id: str, run_id: str) -> None:
        """A checklist an earlier run finished is that run's history (frozen on it), not this
        turn's: the session's live plan is cleared, so the card and the model start clean."""
        plan = self.db.read(sessions_q.get_plan, session_id)
        if not plans.is_settled(plan) or plan.get("ownerRunId") in (None, run_id):
            return   # (the common case: one read, nothing written)
        now = self.now_ms()
        session, owner = await self.db.write(
            lambda conn: sessions_q.retire_settled_plan(conn, session_id, run_id, now))
        if owner is not None:
            self.publisher.publish_run(runs_q.public(owner))
        if session is not None:
            self.publisher.publish_session(session)

    async def _surface(self, run: dict, agent: dict, visitor_tools: list | None = None):  # noqa: ANN202
        """The turn's tool surface (server/runtime/tool_context.py): the agent's model, or a child
        narrowed by its spawner, with delegation's verbs; in a visitor's session, the granted tools alone."""
        return await build_surface(self, Entry("model"), agent, run["sessionId"], run,
                                   history=lambda: self._history(run["sessionId"], run.get("userEventId", "")),
                                   visitor_tools=visitor_tools)

    def _budgets_for(self, run: dict, start: _TurnRows) -> Budgets:
        """The server's budgets, the tokens narrowed to the run's share of its tree's budget, less
        what it used in earlier turns and what its delegated runs used or hold."""
        budget = start.budget
        if not budget:
            # a visitor's run: no more than the tokens its message reserved (store/visitors.py)
            reserved = start.reserved
            return self.budgets if reserved is None else dataclasses.replace(
                self.budgets, tokens=min(self.budgets.tokens, reserved))
        return dataclasses.replace(self.budgets, tokens=min(self.budgets.tokens, budget.get("tokens", self.budgets.tokens)),
                                   spent_own=budget.get("spent", 0), spent_below=delegation_q.spent_below(budget))

    async def user_surface(self, agent: dict, session_id: str, account: str, role: str) -> ToolSurface:
        """The verbs a person runs on a session's log (InvokeSessionTool): the agent's own tools,
        as that person (their account, their role on the agent), without delegation."""
        return await build_surface(self, Entry.person(account, role), agent, session_id)

    @staticmethod
    def _delegation_outcome(state: Delegating, result: TurnResult) -> None:
        """A parking turn carries its delegate calls; a typed child its result, or it fails."""
        result.delegations, result.wait = state.calls, state.wait
        if state.result_schema is None or result.park is not None:
            return
        if state.result is not None:
            result.output = state.result
            result.text = json.dumps(state.result, ensure_ascii=False)[:20_000]
        elif result.status == "succeeded":
            result.status, result.error = "failed", run_error(
                "typed-result", "the delegated task ended without a result that fits its output schema")

    def _history(self, session_id: str, user_event_id: str) -> SessionHistory:
        """The model's view for the turn answering `user_event_id` (or the session's end, for a
        run with none): cached per session and moved on as the worker goes down its queue, so a
        turn reads only what was appended since, and the queued messages ahead of it are never
        its history (server/runtime/history.py)."""
        history = self.histories.pop(session_id, None)   # re-inserted below: most recent last
        upto = None
        if user_event_id:
            upto = (history.upto if history is not None and history.anchor == user_event_id
                    else self.known_seq[1] if self.known_seq[0] == user_event_id
                    else self.db.read(events_q.event_seq, user_event_id))   # None: gone; the end then
        if history is not None and upto is not None and history.upto is not None and upto > history.upto:
            # The next turn down the queue. When nothing past `upto` has been read yet, what is
            # after the old end, up to the session's end, in one read (one round trip on
            # PostgreSQL): the window moves on with what is up to `upto`, the rest is appended.
            # When the cache already holds events past `upto` (messages queued behind this one,
            # read in by an earlier turn), reading from the old end would read the whole queue
            # again at every turn (a 50,000-deep queue: every turn reading 50,000 events): read
            # up to `upto`, then only what was appended since.
            reread = history.last_seq > upto
            events = list(self._read_events(session_id, history.upto, upto if reread else None))
            history.advance(upto, events)
            history.anchor = user_event_id
            history.extend(self._read_events(session_id, history.last_seq) if reread else events)
        else:
            if history is None or history.upto != upto:
                # A first turn, a run whose window is elsewhere (an earlier message's, taken up
                # again), or one without a message: read afresh.
                end = upto if upto is not None else self.db.read(events_q.last_seq, session_id)
                history = SessionHistory(HISTORY_EVENTS, upto, user_event_id if upto is not None else "")
                history.last_seq = max(0, end - HISTORY_EVENTS)
            history.extend(self._read_events(session_id, history.last_seq))   # only what was appended since
        self.histories.put(session_id, history, history.bytes)
        return history

    def _read_events(self, session_id: str, after: int, upto: int | None = None) -> Iterator[dict]:
        """The session's events after `after` (up to `upto`), read a page at a time."""
        while upto is None or after < upto:
            page = self.db.read(events_q.events_after, session_id, after,
                                HISTORY_PAGE if upto is None else min(HISTORY_PAGE, upto - after))
            yield from page
            if len(page) < HISTORY_PAGE:
                return
            after = page[-1]["seq"]

    async def _finish(self, run: dict, agent: dict, result: TurnResult, worker: SessionWorker) -> None:
        """The turn's one transaction: the run's ending, the reply (or the error event), the
        session's and the agent's status; then their publication."""
        publisher = self.publisher
        status = result.status
        session_id = run["sessionId"]
        now = self.now_ms()
        usage_wire = None if result.usage is None else result.usage.to_wire()
        ended = runs_q.transition(run, status, now, error=result.error, usage=usage_wire)
        nonlocal_ended = [ended]   # the job may add what the run ended owing
        still_ours = self.queue.still_ours(run)
        after: list = []

        def job(conn):
            if worker.gone:
                return None  # deleted: write nothing
            if still_ours is None or (status != "canceled" and still_ours(conn)):
                wrote = runs_q.save_run(conn, "running", ended)
            else:
                # Not this server's any more (a lease lost): a run ended elsewhere (StopSession, CancelRun) keeps
                # that ending, and its session and agent settle below as for a local stop; a run
                # requeued (maybe running on another server now) is not this server's to touch.
                # (A turn canceled here always lost its lease: a stop ends the run's row first,
                # and a lease found lost is never written as 'canceled', even if the store, back
                # from an outage, still shows it held: it runs out, and the run is run again.)
                current = runs_q.get_run(conn, run["id"])
                if current is None or current["status"] not in runs_q.TERMINAL:
                    return None
                wrote = False
            appended = titled = notice = settled = None
            if wrote and status == "failed" and set(result.error) - {"code", "message"}:
                runs_q.set_error_detail(conn, run["id"], {k: v for k, v in result.error.items()
                                                          if k not in ("code", "message")})
            if wrote and result.spent is not None:   # before a parent is charged for it
                delegation_q.record_spent(conn, run["id"], result.spent)
            visitors_q.settle_run(conn, run["id"], result.spent)   # a visitor's run: its unused tokens back
            if wrote and "parentRunId" in run:
                # A child: its result is recorded, and its parent told (woken if it was the last).
                if status == "succeeded":
                    delegation_q.set_output(conn, run["id"], result.output if result.output is not None
                                            else {"text": result.text})
                settled = delegation_q.children_ended(conn, [ended], now, new_id)
            if wrote and status == "succeeded":
                meta: dict = {"provider": result.provider_type or agent["definition"].get("modelProvider", ""),
                              "model": result.model,
                              "durationMs": int((time.perf_counter() - (result.message_started or result.started))
                                                * 1000)}
                step_usage = result.step_usage if result.step_usage is not None else result.usage
                if step_usage is not None:
                    meta["usage"] = step_usage.to_wire()
                meta["runId"] = run["id"]
                payload = {"type": "message", "role": "assistant", "content": result.text, "meta": meta}
                appended = events_q.append_event(conn, session_id, payload, new_id(), now,
                                                 self.config.max_event_bytes)
                if result.unmet:
                    owed = result.unmet[0]["steps"]
                    notice = events_q.append_event(conn, session_id, {
                        "type": "message", "role": "user", "actor": "system", "content": plans.unmet_notice(owed),
                        "meta": {"runId": run["id"]}}, new_id(), now)
                    nonlocal_ended[0] = runs_q.set_unmet_obligations(conn, ended, result.unmet)
            elif wrote and status == "failed":
                appended = events_q.append_event(conn, session_id,
                                                 {"type": "error", "message": result.error["message"],
                                                  "meta": {"runId": run["id"]}},
                                                 new_id(), now)
            # else: a cancel or a deletion ended the run first; its ending stands.
            final = ended if wrote else runs_q.get_run(conn, run["id"])
            if status == "canceled" and result.stopped and final is not None and final["status"] == "canceled":
                # A stopped turn (StopSession, CancelRun) leaves what it had streamed, or "Stopped."
                appended = events_q.append_event(conn, session_id, result.stopped, new_id(), now,
                                                 self.config.max_event_bytes)
            if self.run_ended is not None and final is not None and final["status"] in runs_q.TERMINAL:
                after[:] = self.run_ended(conn, final)
            try:
                session = sessions_q.set_session_status(conn, session_id,
                                                        runs_q.session_status_from_runs(conn, session_id), now)
            except NotFound:
                return None  # the session was deleted meanwhile
            if appended is not None and status == "succeeded" and "title" not in session:
                titled = self._auto_title(conn, session_id, now)
            try:
                a = agents_q.set_agent_status(conn, agent["id"], "error" if wrote and status == "failed" else "idle",
                                              now, decoded=False)
            except NotFound:
                a = None
            return appended, notice, nonlocal_ended[0] if wrote else None, titled or session, a, settled

        done = await self.db.write(job)
        timings = self.timings
        if timings is not None:
            timings.mark(run["id"], DURABLE)
        self.queue.release(run)
        self.metrics.runs.labels(status).inc()
        for publish in after:   # what the run's ending started (run-completed triggers)
            publish()
        if done is None or worker.gone:
            return
        appended, notice, r, session, a, settled = done
        for written in (appended, notice):
            if written is not None:
                event, body = written
                publisher.publish_append(session_id, event, body)
        if r is not None:
            publisher.publish_run(runs_q.public(r))
        if settled is not None:
            self.parked.publish(settled)
        publisher.publish_session(session)
        if a is not None:
            publisher.publish_agent(a)
            publisher.notify_account(a["account"], "session-event", agent_id=a["id"], session_id=session_id)
        if timings is not None:
            timings.finished(run["id"])
        if appended is not None and status == "succeeded" and "visitorId" not in session:
            # (a visitor's session keeps its first line: a model call for its title would be the
            # owner's tokens beyond the visitor's limits)
            self.titler.after_turn(agent, session_id, result.provider_type)

    @staticmethod
    def _auto_title(conn, session_id: str, now: int) -> dict | None:
        """After the first reply: the first line of the first user message (CONTRACT section 4)."""
        for event in events_q.events_after(conn, session_id, 0, 50):
            payload = event["event"]
            if payload.get("type") == "message" and payload.get("role") == "user" and payload.get("actor") != "system":
                title = sessions_q.title_from_text(payload.get("content") or "")
                return sessions_q.auto_title(conn, session_id, title, now) if title else None
        return None

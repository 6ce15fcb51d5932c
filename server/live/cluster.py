"""Several servers on one PostgreSQL database as one: each server's publications are carried to
the others as small notices (LISTEN/NOTIFY, server/database/postgres/bus.py), and theirs are replayed
into the local hub.

Only when the storage has a notice bus (`db.notice_bus()`: a shared database); a SQLite server
never builds one, and its publishing pays one `is None` test.

Outgoing: every publication (server/live/broadcaster.py, this cluster its relay) queues one entry (`Cluster.append`, `session`, ...), tagged with
this server's origin id. One sender task packs what is queued into as few NOTIFY payloads as fit
(each under the size limit) and sends them in order in one transaction. Publications happen
after their commit, so a notice never names what another server cannot read yet.

Incoming: one task reads the bus in arrival order (so in order per origin, as PostgreSQL
delivers one sender's notices in commit order), skips its own origin, and hands each to the local
sink (server/live/broadcaster.LocalSink, which never re-broadcasts):
- a durable event is delivered only when someone here follows its session or account, from its
  stored body carried in the notice (up to APPEND_BODY_BYTES), else read back by its seq; the subscriptions' seq filter and gap fill (server/live/subscriptions.py)
  give every subscriber each seq once, in order, whatever order two origins' notices arrive in:
  the per-session counter row lock means seq N has committed before N+1 is assigned, so a gap
  seen on N+1 is always readable;
- a change (session, agent, run) is read as it is now and published (AgentInfo variants per
  role from this server's grants); deletions and account notices as they are; partials travel
  in the notice itself (never stored), and one too large for a notice is dropped and counted;
- side effects: an UpdateAgent elsewhere drops the cached system prompt; a change of access
  elsewhere re-checks this server's guest subscriptions of the agent (a revoked one ends at once,
  as it does locally); a run that ended elsewhere stops the turn running it here; a session
  deleted elsewhere is abandoned by the local runtime.
- a `Resync` (the LISTEN connection was lost, or this reader fell too far behind): caches that
  notices keep fresh are dropped, guest subscriptions re-checked, and every live session
  subscription sends what the database holds past its last seq.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ..database.notices import MAX_NOTICE_BYTES, Resync, Subscription
from ..store import agents as agents_q
from ..store import codec
from ..store import events as events_q
from ..store import journal as journal_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from .broadcaster import Broadcaster
from .grants import Grants

log = logging.getLogger("seed_agents.cluster")

TOPIC = "cluster"
# Room for the payload's envelope ({"t":..,"d":{"o":..,"n":[..]}}) around the entries.
_ENVELOPE_BYTES = 100
MAX_ENTRY_BYTES = MAX_NOTICE_BYTES - _ENVELOPE_BYTES
# An event's stored body up to this size travels in its append notice (base64: 4/3 of it).
APPEND_BODY_BYTES = 3072


class ClusterHost(Protocol):
    """What the relay touches on this server besides its bus, declared here (the App fills it):
    the store's reads, the hub and the local sink it replays into, the live grants, the caches
    notices keep fresh, the sockets (a resync catches their streams up), the runs (RunControl:
    a run ended or parked elsewhere, a session deleted elsewhere), the triggers' timer, the signer
    cache."""

    @property
    def db(self) -> Any: ...
    @property
    def hub(self) -> Any: ...
    @property
    def broadcaster(self) -> Broadcaster: ...
    @property
    def grants(self) -> Grants: ...
    @property
    def cache(self) -> dict: ...
    @property
    def connections(self) -> set: ...
    @property
    def runtime(self) -> Any: ...    # server/runtime/control.RunControl (and its workers), None before start
    @property
    def triggers(self) -> Any: ...   # its `changed()`, None before start
    def forget_signer(self, account_id: str, signer_id: str, *, here_only: bool = False) -> None: ...
    def forget_signers(self) -> None: ...


class Cluster:
    def __init__(self, app: ClusterHost, bus) -> None:  # noqa: ANN001 (a storage notice bus)
        self.app = app
        self.local = app.broadcaster.local   # this server's subscribers only: never sent back out
        self.bus = bus
        self.origin = uuid.uuid4().hex[:16]   # this server (an App), for as long as it runs
        self._queue: list[str] = []           # encoded entries, in publication order
        self._access_queued: set[str] = set()   # agents with an access entry not yet sent
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._sub: Subscription | None = None
        self.sent = 0                # entries sent
        self.received = 0            # entries from other servers handled
        self.dropped_partials = 0    # partials too large for a notice
        self.resyncs = 0

    @classmethod
    def for_app(cls, app) -> Cluster:
        return cls(app, app.db.notice_bus())   # (the storage port's: no dialect asked here)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """LISTEN first (what is published after this returns is heard), then the tasks."""
        self._sub = await self.bus.subscribe()
        self._tasks = [asyncio.create_task(self._send_forever(), name="cluster-send"),
                       asyncio.create_task(self._receive_forever(), name="cluster-receive")]

    async def stop(self, flush_timeout: float = 2.0) -> None:
        if self._queue and self._tasks:   # what this server published reaches the others
            try:
                await asyncio.wait_for(self._flush(), flush_timeout)
            except Exception:   # the database is gone or slow: a later append fills their gap
                log.warning("stopping with notices unsent to the other servers")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks = []
        await self.bus.close()

    async def _flush(self) -> None:
        while self._queue:
            await self._send_queued()

    # -- outgoing --------------------------------------------------------------------------
    def _put(self, entry: list) -> bool:
        text = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8")) > MAX_ENTRY_BYTES:
            return False   # PostgreSQL would refuse the payload (and the batch with it)
        self._queue.append(text)
        self._wake.set()
        return True

    def append(self, session_id: str, seq: int, owner: str, body: bytes) -> None:
        # The stored body rides along when it is small (most events): a server that delivers it
        # needs no read back, one database round trip less on its loop per event delivered.
        # (Its own kind, so a server of an older version skips it as unknown, and its gap fill
        # reads the event at the next append, rather than failing on the entry.)
        if len(body) > APPEND_BODY_BYTES or not self._put(["e", session_id, seq, owner,
                                                             base64.b64encode(body).decode("ascii")]):
            self._put(["a", session_id, seq, owner])

    def partial(self, session_id: str, partial_id: str, patch: dict, owner: str) -> None:
        if not self._put(["p", session_id, partial_id, patch, owner]):
            self.dropped_partials += 1   # other servers' subscribers get the durable reply only

    def run_partial(self, run: dict, patch: dict) -> None:
        run_id = run["id"]
        if not self._put(["q", run_id, run.get("rootRunId") or run_id, patch]):
            self.dropped_partials += 1   # other servers' subscribers get the durable plan and journal only

    def session(self, session: dict, created: bool) -> None:
        self._put(["s", session["id"], int(created), session["agentId"], session["account"]])

    def agent(self, agent: dict, created: bool) -> None:
        self._put(["g", agent["id"], int(created), agent["account"]])

    def run(self, run: dict, owner: str | None) -> None:
        run_id = run["id"]
        self._put(["r", run_id, run.get("rootRunId") or run_id, owner, run.get("status")])

    def journal(self, run: dict, seq: int, owner: str | None) -> None:
        run_id = run["id"]
        self._put(["j", run_id, run.get("rootRunId") or run_id, seq, owner])

    def gone(self, key: str, notice: dict) -> None:
        if not self._put(["x", key, notice]):   # ids are short: not expected
            log.warning("a deletion notice too large to send was dropped: %s", key)

    def notice(self, account_id: str, reason: str, agent_id: str | None, session_id: str | None,
               only: bool) -> None:
        self._put(["n", account_id, reason, agent_id, session_id, int(only)])

    def access(self, agent_id: str) -> None:
        """Access to the agent changed (after the commit): the others re-check their guests.
        One unsent entry per agent is enough: it is handled after the latest commit anyway."""
        if agent_id in self._access_queued:
            return
        self._access_queued.add(agent_id)
        self._put(["c", agent_id])

    def signer_gone(self, account_id: str, signer_id: str) -> None:
        """UnregisterSigner here: the others forget the signer and close its sockets too."""
        self._put(["u", account_id, signer_id])

    async def _send_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._queue:
                try:
                    await self._send_queued()   # retries lost connections itself
                except Exception:   # anything else: that batch is lost, the sender goes on
                    log.exception("notices to the other servers could not be sent")

    async def _send_queued(self) -> None:
        entries, self._queue = self._queue, []
        self._access_queued.clear()
        head = '{"t":"%s","d":{"o":"%s","n":[' % (TOPIC, self.origin)
        payloads: list[str] = []
        batch: list[str] = []
        size = 0
        for entry in entries:   # each under MAX_ENTRY_BYTES (_put refuses larger)
            n = len(entry.encode("utf-8")) + 1
            if batch and size + n > MAX_ENTRY_BYTES:
                payloads.append(head + ",".join(batch) + "]}}")
                batch, size = [], 0
            batch.append(entry)
            size += n
        if batch:
            payloads.append(head + ",".join(batch) + "]}}")
        await self.bus.send(payloads)
        self.sent += len(entries)

    # -- incoming --------------------------------------------------------------------------
    async def _receive_forever(self) -> None:
        while True:
            item = await self._sub.get()
            try:
                if isinstance(item, Resync):
                    self.resync(item.reason)
                    continue
                data = item.data
                if item.topic != TOPIC or data.get("o") == self.origin:
                    continue
                for entry in data.get("n", ()):
                    self.received += 1
                    self.handle(entry)
            except Exception:   # one bad notice must not stop the relay
                log.exception("a notice from another server could not be handled")

    def handle(self, entry: list) -> None:
        """One entry from another server, replayed into the local hub: its kind (the first
        element) picks the row of KINDS below."""
        on = KINDS.get(entry[0]) if entry else None
        if on is None:
            log.warning("ignored a notice of unknown kind %r", entry[0] if entry else None)
            return
        on(self, entry)

    # -- the kinds, one method each (KINDS maps the wire letter to it) -----------------------
    def _on_append(self, entry: list) -> None:
        """A durable event, only when someone here follows it: its stored body from the notice
        when it came along (kind "e"), else read back by its seq (kind "a")."""
        session_id, seq, owner = entry[1:4]
        app = self.app
        if app.hub.has_subscribers("sessions/" + session_id) or app.hub.has_subscribers("account/" + owner):
            if len(entry) > 4:
                body = base64.b64decode(entry[4], validate=True)
            else:
                rows = app.db.read(events_q.event_bodies_after, session_id, seq - 1, 1)
                if not rows or rows[0][0] != seq:
                    return
                body = bytes(rows[0][1])
            event = codec.decode(body)
            if event.get("seq") == seq:
                self.local.append(session_id, event, body, owner)

    def _on_partial(self, entry: list) -> None:
        """A streamed reply's patch, carried in the notice itself (never stored)."""
        _, session_id, partial_id, patch, owner = entry
        hub = self.app.hub
        if hub.has_subscribers("sessions/" + session_id) or hub.has_subscribers("account/" + owner):
            self.local.partial(session_id, partial_id, patch, owner)

    def _on_run_partial(self, entry: list) -> None:
        """A workflow's live progress, carried in the notice itself (never stored)."""
        _, run_id, root, patch = entry
        hub = self.app.hub
        if hub.has_subscribers("runs/" + root) or hub.has_subscribers("runs/" + run_id):
            self.local.run_partial({"id": run_id, "rootRunId": root}, patch)

    def _on_session(self, entry: list) -> None:
        _, session_id, created, agent_id, owner = entry
        app = self.app
        if app.hub.has_subscribers("sessions/" + session_id) or self._follows_agent(agent_id, owner):
            session = app.db.read(sessions_q.get_session, session_id)
            if session is not None:
                self.local.session(session, created=bool(created))

    def _on_agent(self, entry: list) -> None:
        _, agent_id, created, owner = entry
        app = self.app
        app.cache["system_prompts"].pop(agent_id, None)   # UpdateAgent elsewhere
        if self._follows_agent(agent_id, owner):
            agent = app.db.read(agents_q.get_agent, agent_id)
            if agent is not None:
                self.local.agent(agent, created=bool(created))

    def _on_run(self, entry: list) -> None:
        _, run_id, root, owner, status = entry
        app = self.app
        if status in runs_q.TERMINAL:
            self._interrupt([run_id])   # ended elsewhere: the turn running it here stops
        elif status == "waiting" and app.runtime is not None:
            app.runtime.parked_elsewhere()   # parked elsewhere: this server's clock may wake it too
        keys = ("runs/" + root, "runs/" + run_id, "account/" + (owner or ""))
        if any(app.hub.has_subscribers(k) for k in keys):
            run = app.db.read(runs_q.get_run, run_id)
            if run is not None:
                self.local.run(runs_q.public(run), owner)

    def _on_journal(self, entry: list) -> None:
        _, run_id, root, seq, _owner = entry
        app = self.app
        if app.hub.has_subscribers("runs/" + root) or app.hub.has_subscribers("runs/" + run_id):
            found = app.db.read(journal_q.entry, run_id, seq)
            run = app.db.read(runs_q.get_run, run_id)
            if found is not None and run is not None:
                self.local.journal(run, found)

    def _on_gone(self, entry: list) -> None:
        """A session or agent deleted elsewhere: its last event here, and what it leaves behind."""
        _, key, notice = entry
        app = self.app
        kind_of_key, _, ident = key.partition("/")
        if kind_of_key == "sessions":
            if app.runtime is not None:   # (notices are heard from before the runtime starts)
                app.runtime.abandon_sessions([ident])
        elif kind_of_key == "agents":
            app.cache["system_prompts"].pop(ident, None)
        self.local.gone(key, notice)

    def _on_notice(self, entry: list) -> None:
        _, account_id, reason, agent_id, session_id, only = entry
        app = self.app
        if only:
            self.local.notify_only(account_id, reason, agent_id=agent_id, session_id=session_id)
        else:
            self.local.notify_account(account_id, reason, agent_id=agent_id, session_id=session_id)
        if reason.startswith("trigger-") and app.triggers is not None:
            app.triggers.changed()   # a trigger changed elsewhere: this server's timer looks again

    def _on_access(self, entry: list) -> None:
        self.app.grants.changed_elsewhere(entry[1])

    def _on_signer_gone(self, entry: list) -> None:
        self.app.forget_signer(entry[1], entry[2], here_only=True)

    def _follows_agent(self, agent_id: str, owner: str) -> bool:
        """Does anyone here hear of the agent: its key, its owner's account, or a collaborator's
        account (the account notices a change brings)."""
        hub = self.app.hub
        if hub.has_subscribers("agents/" + agent_id) or hub.has_subscribers("account/" + owner):
            return True
        return any(hub.has_subscribers("account/" + a) for a in self.app.grants.audience(agent_id))

    def _interrupt(self, run_ids: list[str]) -> None:
        runtime = self.app.runtime
        if runtime is None:
            return
        runtime.interrupt_runs(run_ids)

    def resync(self, reason: str) -> None:
        """Notices may have been lost (and those queued but not yet handled were dropped): what
        they would have said is read from the database. Costs a read per local guest account,
        running turn and live subscription; it happens on a reconnect, rarely."""
        from .subscriptions import SessionSubscription

        self.resyncs += 1
        app = self.app
        log.warning("re-reading live state from the database: %s", reason)
        app.cache["system_prompts"].clear()
        app.forget_signers()   # an UnregisterSigner may have been lost
        app.grants.resync()   # revocations
        runtime = app.runtime
        workers = runtime.workers if runtime is not None else {}
        ended, deleted = [], []
        for session_id, worker in list(workers.items()):   # runs stopped or sessions deleted elsewhere
            if app.db.read(sessions_q.get_session, session_id) is None:
                deleted.append(session_id)
                continue
            run_id = worker.run_id
            if run_id is not None:
                run = app.db.read(runs_q.get_run, run_id)
                if run is None or run["status"] in runs_q.TERMINAL:
                    ended.append(run_id)
        if deleted:
            runtime.abandon_sessions(deleted)
        if ended:
            self._interrupt(ended)
        for conn in list(app.connections):
            for key, sub in list(conn.subs.items()):
                if isinstance(sub, SessionSubscription):
                    sub.catch_up()   # appends past its last seq; its deletion
                elif key.startswith("agents/") and app.hub.has_subscribers(key):
                    agent_id = key.partition("/")[2]
                    if app.db.read(agents_q.agent_account, agent_id) is None:
                        self.local.gone(key, {"reason": "agent-deleted", "agentId": agent_id})


# The kinds of entry one server sends the others: the wire letter -> what this server does on
# hearing it. A new kind is a sending method above (`_put([letter, ...])`) and one row here.
KINDS: dict[str, Callable[[Cluster, list], None]] = {
    "a": Cluster._on_append,       # a durable event (by seq)
    "e": Cluster._on_append,       # a durable event with its stored body
    "p": Cluster._on_partial,      # a streamed reply's patch
    "q": Cluster._on_run_partial,  # a workflow's live progress
    "s": Cluster._on_session,      # SessionInfo changed
    "g": Cluster._on_agent,        # AgentInfo changed
    "r": Cluster._on_run,          # RunInfo changed
    "j": Cluster._on_journal,      # a run journal entry
    "x": Cluster._on_gone,         # a session or agent deleted
    "n": Cluster._on_notice,       # an account notice
    "c": Cluster._on_access,       # access to an agent changed
    "u": Cluster._on_signer_gone,  # a signer unregistered
}

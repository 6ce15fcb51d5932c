"""The server's shared state: configuration, database, hub, guards, runtime and publishing."""
from __future__ import annotations

import asyncio
import logging
import os
import time

from seed_agents.protocol import events
from seed_agents.protocol.errors import ProtocolError
from seed_agents.protocol.keys import Keypair

from .cache import ByteBudgetCache, text_bytes
from .clock import now_ms
from .config import Config
from .heads import Heads
from .live.frames import Outgoing
from .live.hub import Hub
from .operations.metrics import Metrics
from .ratelimit import RateLimiter
from .runtime.runner import Runtime
from .storage import database_for
from .storage.filemodes import make_private_dir, warn_if_wide
from .store import accounts as accounts_q
from .store import agents as agents_q
from .store import codec, key_check
from .store import history as history_q
from .store import server_key as server_key_q
from .store import sessions as sessions_q
from .store import signatures as sig_q
from .store import uploads as uploads_q
from .store.secrets import SecretBox, load_secrets_key
from .verification.replay_guard import ReplayGuard
from .verification.upload_gate import UploadGate

log = logging.getLogger(__name__)


def key_check_refusal(shared: bool, where: str) -> str:
    """The one sentence of a start refused by the secrets key check."""
    if shared:
        return (f"this server's secrets key is not the key the other servers on {where} use (secrets "
                "sealed by one must open on all): give every server the same SEED_AGENTS_SECRETS_KEY")
    return (f"the secrets in {os.path.abspath(where)} were sealed with another secrets key than this "
            "server's (SEED_AGENTS_SECRETS_KEY, else <data-dir>/secrets.key): start it with the key "
            "they were sealed with, or with --accept-new-secrets-key true to start anyway and set "
            "each provider's key again (`seed-agents providers set NAME ...`)")


class App:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.db = database_for(config)   # SQLite file or PostgreSQL: the same store functions
        self.hub = Hub()
        from .live.grants import Grants  # (it reads through the handlers' access function)

        self.grants = Grants(self)
        self.metrics = Metrics()
        self.guard = ReplayGuard(config.clock_window_ms)
        self.limiter = RateLimiter(config.limits.rate_per_second, config.limits.rate_burst)
        self.secrets: SecretBox | None = None
        self.started_at = time.monotonic()
        self.runtime: Runtime | None = None  # made in start(), once the secrets key is read
        self.heads: Heads | None = None   # signed session heads, made in start() with the server key
        self.triggers = None   # server/triggers/service.Triggers, made in start() after the runtime
        # Several servers on one database (PostgreSQL): publications cross to the others
        # (server/live/cluster.py). None on SQLite, where publishing pays one `is None` test.
        self.cluster = None
        self.connections: set = set()
        self.sockets_by_account: dict[str, int] = {}
        # (account, signer) pairs known to be registered; a miss is one primary-key read.
        self._signers = ByteBudgetCache("signers", config.owner_cache_bytes)
        self._tasks: list[asyncio.Task] = []
        # Every in-memory cache, by name, each bounded in bytes (server/cache.py) and exported
        # as seed_agents_cache_*{cache=name}.
        self.cache: dict[str, ByteBudgetCache] = {c.name: c for c in (
            ByteBudgetCache("system_prompts", config.prompt_cache_bytes),
            ByteBudgetCache("session_owner", config.owner_cache_bytes),
            ByteBudgetCache("agent_owner", config.owner_cache_bytes),
            ByteBudgetCache("history", config.history_cache_bytes),
            ByteBudgetCache("definitions", config.prompt_cache_bytes),
            self._signers)}
        for cache in self.cache.values():
            self.metrics.watch_cache(cache)
        self.metrics.watch_outbound(self.connections)
        self.now_ms = now_ms
        self.upload_gate = UploadGate()   # upload chunks worked on at once (server/verification/upload_gate.py)

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        make_private_dir(self.config.data_dir)   # 0700; files in it 0600 (store/filemodes.py)
        self.secrets = SecretBox(load_secrets_key(self.config.data_dir, os.environ))
        await self.db.start()
        if not await self.db.write(key_check.same_key, self.secrets):
            if self.config.accept_new_secrets_key:
                await self.db.write(key_check.record_key, self.secrets)
            else:
                await self.db.close()
                raise key_check.SecretsKeyMismatch(key_check_refusal(self.db.shared, self.db.path))
        warn_if_wide(self.config.data_dir, None if self.db.shared else self.config.db_path)
        await self._start_history()
        now = self.now_ms()
        # `now` is also the start time: reads signed at or before it are refused unless known
        # (a SIGKILLed process may have answered them; server/verification/replay_guard.py)
        if self.db.shared:
            # Every claim is in the database before its answer (claim_everywhere), so nothing a
            # dead server answered can be unknown here: no start-time rule, nothing to preload.
            self.guard.load([], started_ms=None)
            from .live.cluster import Cluster  # psycopg only where PostgreSQL is used

            cluster = Cluster.for_app(self)
            await cluster.start()   # listening before anything is published or subscribed
            self.cluster = cluster
            self.metrics.watch_cluster(cluster)
        else:
            self.guard.load(self.db.read(sig_q.unexpired_signatures, now), started_ms=now)
        self.runtime = Runtime(self.db, self.config, self.metrics, self, self.secrets, self.now_ms,
                               self.cache["history"])
        self.cache["preambles"] = self.runtime.preambles.cache
        self.metrics.watch_cache(self.runtime.preambles.cache)
        await self.runtime.start()
        from .triggers.service import Triggers  # (its modules read the store and the runtime)

        self.triggers = Triggers(self)
        await self.triggers.start()
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="housekeeping"))

    async def _start_history(self) -> None:
        """The server key (made at the first start, shared through the database), then the
        chain of every event stored before there were chains, in batches that each commit
        whole, so a start interrupted here goes on where it stopped (docs/storage.md)."""
        seed = await self.db.write(server_key_q.load_or_create, self.secrets, os.urandom(32))
        self.heads = Heads(Keypair.from_seed(seed), self.now_ms, self.config.owner_cache_bytes)
        self.metrics.watch_cache(self.heads.cache)
        linked = 0
        while (done := await self.db.write(history_q.backfill, 5000)):
            linked += done
            log.info("linking stored events into their sessions' chains: %d so far", linked)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.triggers is not None:
            await self.triggers.stop()
        if self.runtime is not None:
            await self.runtime.stop()
        if self.cluster is not None:
            await self.cluster.stop()
            self.cluster = None
        self.save_signatures()
        await self.db.close()

    def save_signatures(self) -> None:
        rows = self.guard.take_unsaved()
        if rows and not self.db.shared:   # shared: each was claimed in the database already
            self.db.write_nowait(sig_q.claim_signatures, rows, self.now_ms())

    async def claim_everywhere(self, sig: bytes, expires_at: int, is_read: bool, now: int) -> None:
        """The claim in the shared database (several servers): 409 when another server holds
        it. A write's claim is durable before its answer; a read's is committed without waiting
        for the disk (docs/storage.md: only a database crash could forget it)."""
        if not await self.db.claim_signature(sig, expires_at, now, durable=not is_read):
            self.guard.forget(sig)
            raise ProtocolError(409, "replayed envelope: this signature was already accepted (by "
                                     "another server); sign the action again (new ts) and use "
                                     "idempotency ids for retries")

    async def save_signatures_durably(self) -> None:
        """Queue the unsaved claims and wait for their commit (a read signed ahead of the server
        clock must be durable before it is answered)."""
        rows = self.guard.take_unsaved()
        if rows and not self.db.shared:
            await self.db.write(sig_q.claim_signatures, rows, self.now_ms())

    async def _housekeeping(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(0.1)
            self.save_signatures()
            ticks += 1
            if ticks % 50 == 0:
                now = self.now_ms()
                self.guard.prune(now)
                self.db.write_nowait(sig_q.prune_signatures, now)
            if ticks % 600 == 0:   # uploads untouched for an hour go, with their staged bytes
                self.db.write_nowait(uploads_q.sweep, self.now_ms())

    # -- authorization state ---------------------------------------------------------------
    def signer_known(self, account_id: str, signer_id: str) -> bool:
        """Is the signer registered for the account, and its capability not expired?"""
        known = self._signers.get((account_id, signer_id))
        if known is None:
            registered, expires_at = self.db.read(accounts_q.signer_expiry, account_id, signer_id)
            if not registered:
                return False
            known = self.remember_signer(account_id, signer_id, expires_at)
        return known is True or known > self.now_ms()

    def remember_signer(self, account_id: str, signer_id: str, expires_at: int | None = None):
        """Cache a registration: True, or the time its capability expires."""
        known = True if expires_at is None else expires_at
        self._signers.put((account_id, signer_id), known, len(account_id) + len(signer_id))
        return known

    def forget_signer(self, account_id: str, signer_id: str) -> None:
        """An unregistered signer: out of the cache, and every socket that acted through it
        closed (a captured socket must not outlive the key the account took back); the other
        servers of a shared store do the same."""
        if self.cluster is not None:
            self.cluster.signer_gone(account_id, signer_id)
        self._forget_signer(account_id, signer_id)

    def _forget_signer(self, account_id: str, signer_id: str) -> None:
        self._signers.pop((account_id, signer_id))
        for conn in list(self.connections):
            if conn.account_id == account_id and signer_id in conn.signers:
                conn.close_for(1008, "signer unregistered by the account")

    def uptime(self) -> float:
        return time.monotonic() - self.started_at

    # -- publishing: the routing of CONTRACT section 5 -------------------------------------
    # Each event is built (and later encoded) once, then handed to the subscribers of every key
    # it is routed to; an event keeps its own key (`sessions/<id>` also when an `agents/` or
    # `account/` subscriber receives it). The hub indexes subscribers by key, so publishing
    # costs only the subscribers of those keys.
    #
    # Each public method is what a handler or the runtime calls: on a shared database it also
    # tells the other servers (self.cluster); its `_` twin publishes here only. The cluster's
    # relay calls the twins for another server's publication, and nested calls use them, so
    # one publication crosses once.
    def _send(self, event: Outgoing, *keys: str) -> None:
        self.metrics.published.inc()
        self.hub.publish_to(keys, event)

    def publish_append(self, session_id: str, event: dict, body: bytes) -> None:
        """A durable event: to its session and to the account that owns the session."""
        owner = self._session_owner(session_id)
        if self.cluster is not None:
            self.cluster.append(session_id, event["seq"], owner)
        self._publish_append(session_id, event, body, owner)

    def _publish_append(self, session_id: str, event: dict, body: bytes, owner: str) -> None:
        key = "sessions/" + session_id
        self._send(Outgoing(key, events.append(key, event), seq=event["seq"], body=body),
                   key, "account/" + owner)

    def publish_partial(self, session_id: str, partial_id: str, patch: dict) -> None:
        owner = self._session_owner(session_id)
        if self.cluster is not None:
            self.cluster.partial(session_id, partial_id, patch, owner)
        self._publish_partial(session_id, partial_id, patch, owner)

    def _publish_partial(self, session_id: str, partial_id: str, patch: dict, owner: str) -> None:
        key = "sessions/" + session_id
        self._send(Outgoing(key, events.append_partial(key, partial_id, patch)), key, "account/" + owner)

    def publish_change(self, key: str, value: dict) -> None:
        """The new value of what `key` names, routed by its kind (see publish_session,
        publish_agent, publish_run); an update, never a creation."""
        kind = key.partition("/")[0]
        if kind == "sessions":
            self.publish_session(value)
        elif kind == "agents":
            self.publish_agent(value)
        elif kind == "runs":
            self.publish_run(value)
        else:   # no other kind is published today; such a change stays on this server
            self._send(Outgoing(key, events.change(key, value)), key)

    def publish_session(self, session: dict, *, created: bool = False) -> None:
        """SessionInfo: to the session, its agent and its account; every change after the
        creation is also announced as `session-updated`."""
        if self.cluster is not None:
            self.cluster.session(session, created)
        self._publish_session(session, created=created)

    def _publish_session(self, session: dict, *, created: bool = False) -> None:
        key = "sessions/" + session["id"]
        self._send(Outgoing(key, events.change(key, session)),
                   key, "agents/" + session["agentId"], "account/" + session["account"])
        if not created:
            self._notify_account(session["account"], "session-updated", agent_id=session["agentId"],
                                 session_id=session["id"])

    def agent_decoded(self, agent: dict) -> dict:
        """The AgentInfo with its definition decoded, when the writer left it as stored bytes
        (store/agents.agent_info): decoded once per agent and version, then reused."""
        raw = agent["definition"]
        if type(raw) is not bytes:
            return agent
        cache = self.cache["definitions"]
        known = cache.get(agent["id"])
        if known is None or known[0] != raw:
            known = (raw, codec.decode(raw))
            cache.put(agent["id"], known, 4 * len(raw) + 256)
        return {**agent, "definition": known[1]}

    def publish_agent(self, agent: dict, *, created: bool = False) -> None:
        """AgentInfo: to the agent and its account; every change after the creation (status,
        definition, activity) is also announced as `agent-updated`. `accessRole` is each
        subscriber's own: guests of the agent get the writer's or reader's copy (built once)."""
        agent = self.agent_decoded(agent)
        if self.cluster is not None:
            self.cluster.agent(agent, created)
        self._publish_agent(agent, created=created)

    def _publish_agent(self, agent: dict, *, created: bool = False) -> None:
        key = "agents/" + agent["id"]
        event = Outgoing(key, events.change(key, agent))
        if self.grants.has_guests(agent["id"]):
            event.variants = {role: Outgoing(key, events.change(key, agents_q.as_seen_by(agent, role)))
                              for role in ("writer", "reader")}
        self._send(event, key, "account/" + agent["account"])
        if not created:
            self._notify_account(agent["account"], "agent-updated", agent_id=agent["id"])

    def publish_run(self, run: dict) -> None:
        """RunInfo: as a `change` on `runs/<rootRunId>` (the key a client follows a tree by;
        the value's `id` says which run changed), to the subscribers of the root, of the run
        itself when it is not the root, and of its account."""
        owner = run.get("account") or self._agent_owner(run["agentId"])
        if self.cluster is not None:
            self.cluster.run(run, owner)
        self._publish_run(run, owner)

    def _publish_run(self, run: dict, owner: str | None) -> None:
        run_id = run["id"]
        root = run.get("rootRunId") or run_id
        key = "runs/" + root
        keys = [key] if root == run_id else [key, "runs/" + run_id]
        if owner is not None:
            keys.append("account/" + owner)
        self._send(Outgoing(key, events.change(key, run)), *keys)

    def publish_journal(self, run: dict, entry: dict) -> None:
        """A run journal entry (RunJournalEntryInfo of `run`): to `runs/<rootRunId>`, the key a
        tree is followed by, and to the run's own key when it is not the root."""
        owner = run.get("account") or self._agent_owner(run["agentId"])
        if self.cluster is not None:
            self.cluster.journal(run, entry["seq"], owner)
        self._publish_journal(run, entry)

    def _publish_journal(self, run: dict, entry: dict) -> None:
        root = run.get("rootRunId") or run["id"]
        key = "runs/" + root
        keys = [key] if root == run["id"] else [key, "runs/" + run["id"]]
        self._send(Outgoing(key, events.journal_append(key, entry)), *keys)

    def publish_gone(self, key: str, notice: dict) -> None:
        """The last event of a deleted session or agent: `change` with the deletion notice
        (`{reason, agentId, sessionId?}`) to that key's subscribers, who then receive nothing
        more (the hub forgets the key)."""
        if self.cluster is not None:
            self.cluster.gone(key, notice)
        self._publish_gone(key, notice)

    def _publish_gone(self, key: str, notice: dict) -> None:
        self._send(Outgoing(key, events.change(key, notice)), key)
        self.hub.drop(key)

    def notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                       session_id: str | None = None) -> None:
        """An account notice: to the account, and to the agent it names; a notice naming a
        shared agent also reaches each accepted collaborator's `account/<id>`, keyed by it."""
        if self.cluster is not None:
            self.cluster.notice(account_id, reason, agent_id, session_id, only=False)
        self._notify_account(account_id, reason, agent_id=agent_id, session_id=session_id)

    def _notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                        session_id: str | None = None) -> None:
        value = self._notice(reason, agent_id, session_id)
        key = "account/" + account_id
        event = Outgoing(key, events.change(key, value))
        if agent_id is None:
            self._send(event, key)
            return
        self._send(event, key, "agents/" + agent_id)
        for collaborator in self.grants.audience(agent_id):
            if collaborator != account_id:
                self._notify_only(collaborator, reason, agent_id=agent_id, session_id=session_id)

    def notify_only(self, account_id: str, reason: str, *, agent_id: str | None = None,
                    session_id: str | None = None) -> None:
        """An account notice to that account's own key alone (an invitee, a removed
        collaborator, each collaborator of a shared agent)."""
        if self.cluster is not None:
            self.cluster.notice(account_id, reason, agent_id, session_id, only=True)
        self._notify_only(account_id, reason, agent_id=agent_id, session_id=session_id)

    def _notify_only(self, account_id: str, reason: str, *, agent_id: str | None = None,
                     session_id: str | None = None) -> None:
        key = "account/" + account_id
        if self.hub.has_subscribers(key):   # built only for someone
            self._send(Outgoing(key, events.change(key, self._notice(reason, agent_id, session_id))), key)

    @staticmethod
    def _notice(reason: str, agent_id: str | None, session_id: str | None) -> dict:
        value: dict = {"reason": reason}
        if agent_id is not None:
            value["agentId"] = agent_id
        if session_id is not None:
            value["sessionId"] = session_id
        return value

    # Owners never change, so they are cached (bounded in bytes; a miss is one primary-key read).
    def _session_owner(self, session_id: str) -> str:
        owners = self.cache["session_owner"]
        owner = owners.get(session_id)
        if owner is None:
            session = self.db.read(sessions_q.get_session, session_id)
            owner = session["account"] if session is not None else ""
            owners.put(session_id, owner, text_bytes(session_id) + len(owner))
        return owner

    def _agent_owner(self, agent_id: str) -> str | None:
        owners = self.cache["agent_owner"]
        owner = owners.get(agent_id)
        if owner is None:
            owner = self.db.read(agents_q.agent_account, agent_id)
            if owner is None:
                return None
            owners.put(agent_id, owner, text_bytes(agent_id) + len(owner))
        return owner

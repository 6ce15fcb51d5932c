"""The server's shared state: configuration, database, hub, guards, runtime and publishing."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.keys import Keypair

from .cache import ByteBudgetCache
from .clock import now_ms
from .config import Config
from .handlers.context import HandlerContext
from .heads import Heads
from .live.broadcaster import Broadcaster, LocalSink
from .live.cluster import Cluster, ClusterHost
from .live.grants import Grants
from .live.streams import LiveParts
from .live.hub import Hub
from .live.replay_frames import ReplayFrames
from .operations.metrics import Metrics
from .ratelimit import RateLimiter, scaled_clock
from .runtime.runner import Runtime
from .database import database_for
from .database.port import SharedStorage, Storage
from .database.filemodes import make_private_dir, warn_if_wide
from .store import accounts as accounts_q
from .store import key_check
from .store import history as history_q
from .store import server_key as server_key_q
from .store import signatures as sig_q
from .store import uploads as uploads_q
from .store.secrets import SecretBox, load_secrets_key
from .verification.replay_guard import ReplayGuard
from .verification.upload_gate import UploadGate

if TYPE_CHECKING:
    from .hypermedia.publications import PublicationQueue
    from .triggers.service import Triggers

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
        self.db: Storage = database_for(config)   # SQLite file or PostgreSQL: the same store functions
        self.hub = Hub()
        self.grants = Grants(self.db)
        self.metrics = Metrics()
        self.guard = ReplayGuard(config.clock_window_ms)
        # Every token bucket's clock (server/ratelimit.py): a test's own makes refills deterministic.
        self.rate_clock = config.rate_clock or scaled_clock(config.rate_clock_speed)
        self.limiter = RateLimiter(config.limits.rate_per_second, config.limits.rate_burst, self.rate_clock)
        self.secrets: SecretBox | None = None
        self.started_at = time.monotonic()
        self.runtime: Runtime | None = None  # made in start(), once the secrets key is read
        self.heads: Heads | None = None   # signed session heads, made in start() with the server key
        self.triggers: Triggers | None = None   # made in start() after the runtime
        self.publications: PublicationQueue | None = None   # with an HM server
        # Several servers on one database (PostgreSQL): publications cross to the others
        # (server/live/cluster.py). None on SQLite, where publishing pays one `is None` test.
        self.cluster: Cluster | None = None
        self.connections: set = set()
        self.sockets_by_account: dict[str, int] = {}
        # (account, signer) pairs known to be registered; a miss is one primary-key read.
        self._signers = ByteBudgetCache("signers", config.owner_cache_bytes)
        self._tasks: list[asyncio.Task] = []
        # Every in-memory cache, by name, each bounded in bytes (server/cache.py) and exported
        # as seed_agents_cache_*{cache=name}.
        self.cache: dict[str, Any] = {c.name: c for c in (
            ByteBudgetCache("system_prompts", config.prompt_cache_bytes),
            ByteBudgetCache("session_owner", config.owner_cache_bytes),
            ByteBudgetCache("agent_owner", config.owner_cache_bytes),
            ByteBudgetCache("history", config.history_cache_bytes),
            ByteBudgetCache("definitions", config.prompt_cache_bytes),
            self._signers)}
        self.cache["replay_frames"] = ReplayFrames(config.replay_cache_bytes)   # (v1's replays)
        for cache in self.cache.values():
            self.metrics.watch_cache(cache)
        self.metrics.watch_outbound(self.connections)
        self.metrics.watch_database(self.db)
        self._now_ms = now_ms
        # What dispatch hands every handler (server/handlers/context.py): built at the end of
        # start(), from the parts made there; the App itself is never a handler's argument.
        self.context: HandlerContext | None = None
        # Publishing (server/live/broadcaster.py): the cluster relay joins it in start().
        self.broadcaster = Broadcaster(LocalSink(self.hub, self.metrics, self.grants), self.db, self.cache)
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
        warn_if_wide(self.config.data_dir, self.db.local_path)
        await self._start_history()
        now = self.now_ms()
        # `now` is also the start time: reads signed at or before it are refused unless known
        # (a SIGKILLed process may have answered them; server/verification/replay_guard.py)
        if self.db.shared:   # (several servers: the storage has a notice bus, below)
            # Every claim is in the database before its answer (claim_everywhere), so nothing a
            # dead server answered can be unknown here: no start-time rule, nothing to preload.
            self.guard.load([], started_ms=None)
            cluster = Cluster.for_app(self)
            await cluster.start()   # listening before anything is published or subscribed
            self.cluster = cluster
            self.broadcaster.relay = cluster   # publications, and changes of access, reach the others
            self.grants.relay = cluster
            self.metrics.watch_cluster(cluster)
        else:
            self.guard.load(self.db.read(sig_q.unexpired_signatures, now), started_ms=now)
        self.runtime = Runtime(self.db, self.config, self.metrics, self.broadcaster, self.secrets, self.now_ms,
                               self.cache["history"])
        self.cache["preambles"] = self.runtime.preambles.cache
        self.metrics.watch_cache(self.runtime.preambles.cache)
        await self.runtime.start()
        from .triggers.clock import trigger_clock  # (its modules read the store and the runtime)
        from .triggers.port import TriggerContext
        from .triggers.service import Triggers as TriggerService

        self.triggers = TriggerService(TriggerContext(
            db=self.db, config=self.config, now_ms=self._now_ms, broadcaster=self.broadcaster,
            runtime=self.runtime, metrics=self.metrics, secrets=self.secrets, clock=trigger_clock(self.config)))
        self.runtime.trigger_admin = self.triggers
        self.runtime.on_run_end(self.triggers.run_ended)   # run-completed triggers fire in its transaction
        await self.triggers.start()
        if self.runtime.hm is not None:   # what the HM server did not take, sent again until it does
            from .hypermedia.publications import PublicationQueue
            from .runtime.leasing import server_id

            self.publications = PublicationQueue(self, server_id())
            await self.publications.start()
        self.context = HandlerContext(
            db=self.db, config=self.config, now_ms=self._now_ms, broadcaster=self.broadcaster,
            runtime=self.runtime, grants=self.grants, triggers=self.triggers, secrets=self.secrets,
            heads=self.heads, cache=self.cache, publications=self.publications,
            remember_signer=self.remember_signer, forget_signer=self.forget_signer)
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="housekeeping"))

    @property
    def now_ms(self) -> Callable[[], int]:
        return self._now_ms

    @now_ms.setter
    def now_ms(self, clock: Callable[[], int]) -> None:
        """The clock is injected (tests move it): the handlers' and triggers' contexts follow."""
        self._now_ms = clock
        if self.context is not None:
            self.context.now_ms = clock
        if self.triggers is not None:
            self.triggers.ctx.now_ms = clock

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
        if self.publications is not None:
            await self.publications.stop()
        if self.triggers is not None:
            await self.triggers.stop()
        if self.runtime is not None:
            await self.runtime.stop()
        if self.cluster is not None:
            self.broadcaster.relay = None
            self.grants.relay = None
            await self.cluster.stop()
            self.cluster = None
        self.save_signatures()
        await self.db.close()

    def save_signatures(self, ride: bool = False) -> bool:
        """Queue the unsaved claims (`ride`: carried by the next write, see write_nowait); True
        when some were queued."""
        rows = self.guard.take_unsaved()
        if rows and not self.db.shared:   # shared: each was claimed in the database already
            self.db.write_nowait(sig_q.claim_signatures, rows, self.now_ms(), ride=ride,
                                 merge=sig_q.merged_claims)
            return True
        return False

    async def claim_everywhere(self, sig: bytes, expires_at: int, is_read: bool, now: int) -> None:
        """The claim in the shared database (several servers): 409 when another server holds
        it. A write's claim is durable before its answer; a read's is committed without waiting
        for the disk (docs/storage.md: only a database crash could forget it)."""
        shared = cast(SharedStorage, self.db)   # (only a shared backend is asked: dispatch checks db.shared)
        if not await shared.claim_signature(sig, expires_at, now, durable=not is_read):
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

    def forget_signer(self, account_id: str, signer_id: str, *, here_only: bool = False) -> None:
        """An unregistered signer: out of the cache, and every socket that acted through it
        closed (a captured socket must not outlive the key the account took back); the other
        servers of a shared store do the same (`here_only`: the cluster relaying theirs)."""
        if self.cluster is not None and not here_only:
            self.cluster.signer_gone(account_id, signer_id)
        self._signers.pop((account_id, signer_id))
        for conn in list(self.connections):
            if conn.account_id == account_id and signer_id in conn.signers:
                conn.close_for(1008, "signer unregistered by the account")

    def forget_signers(self) -> None:
        """Every cached registration (notices from other servers may have been lost)."""
        self._signers.clear()

    def uptime(self) -> float:
        return time.monotonic() - self.started_at


def live_parts(app: App) -> LiveParts:
    """The App as a socket's streams see it (server/live/streams.py); mypy checks it here."""
    return app


def cluster_host(app: App) -> ClusterHost:
    """The App as the cluster relay sees it (server/live/cluster.py); mypy checks it here."""
    return app

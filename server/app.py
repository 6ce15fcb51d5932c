"""The server's shared state: configuration, database, hub, guards, runtime and publishing."""
from __future__ import annotations

import asyncio
import os
import time
import uuid

from server.config import Config
from server.frames import Outgoing
from server.hub import Hub
from server.metrics import Metrics
from server.ratelimit import RateLimiter
from server.replay_guard import ReplayGuard
from server.store import signatures as sig_q
from server.store.database import Database
from server.store.filemodes import make_private_dir, warn_if_wide
from server.store.secrets import SecretBox, load_secrets_key

def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    return str(uuid.uuid4())


class App:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.db = Database(config.db_path)
        self.hub = Hub()
        self.metrics = Metrics()
        self.guard = ReplayGuard(config.clock_window_ms)
        self.limiter = RateLimiter(config.limits.rate_per_second, config.limits.rate_burst)
        self.secrets: SecretBox | None = None
        self.started_at = time.monotonic()
        self.runtime = None  # set in start(); see server.runtime.runner
        self.connections: set = set()
        self.sockets_by_account: dict[str, int] = {}
        self._signers: set[tuple[str, str]] = set()   # (account, signer) pairs known to be registered
        self._tasks: list[asyncio.Task] = []
        self.cache: dict[str, dict] = {}   # small read caches of immutable values, by name
        self.now_ms = now_ms

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        from server.runtime.runner import Runtime  # the runtime needs a started app

        make_private_dir(self.config.data_dir)   # 0700; files in it 0600 (store/filemodes.py)
        self.secrets = SecretBox(load_secrets_key(self.config.data_dir, os.environ))
        await self.db.start()
        warn_if_wide(self.config.data_dir, self.config.db_path)
        now = self.now_ms()
        # `now` is also the start time: reads signed at or before it are refused unless known
        # (a SIGKILLed process may have answered them; server/replay_guard.py)
        self.guard.load(self.db.read(sig_q.unexpired_signatures, now), started_ms=now)
        self.runtime = Runtime(self)
        await self.runtime.start()
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="housekeeping"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.runtime is not None:
            await self.runtime.stop()
        self.save_signatures()
        await self.db.close()

    def save_signatures(self) -> None:
        rows = self.guard.take_unsaved()
        if rows:
            self.db.write_nowait(sig_q.claim_signatures, rows, self.now_ms())

    async def save_signatures_durably(self) -> None:
        """Queue the unsaved claims and wait for their commit (a read signed ahead of the server
        clock must be durable before it is answered)."""
        rows = self.guard.take_unsaved()
        if rows:
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

    # -- authorization state ---------------------------------------------------------------
    def signer_known(self, account_id: str, signer_id: str) -> bool:
        if (account_id, signer_id) in self._signers:
            return True
        from server.store import accounts

        if self.db.read(accounts.is_signer, account_id, signer_id):
            self._signers.add((account_id, signer_id))
            return True
        return False

    def remember_signer(self, account_id: str, signer_id: str) -> None:
        self._signers.add((account_id, signer_id))

    def uptime(self) -> float:
        return time.monotonic() - self.started_at

    # -- publishing ------------------------------------------------------------------------
    def publish(self, key: str, value: dict, *, seq: int = 0, body: bytes | None = None) -> None:
        self.metrics.published.inc()
        self.hub.publish(Outgoing(key, value, seq=seq, body=body))

    def publish_append(self, session_id: str, event: dict, body: bytes) -> None:
        key = "sessions/" + session_id
        self.publish(key, {"_": "append", "key": key, "event": event}, seq=event["seq"], body=body)

    def publish_partial(self, session_id: str, partial_id: str, patch: dict) -> None:
        key = "sessions/" + session_id
        self.publish(key, {"_": "appendPartial", "key": key, "partialId": partial_id, "patch": patch})

    def publish_change(self, key: str, value: dict) -> None:
        self.publish(key, {"_": "change", "key": key, "value": value})

    def notify_account(self, account_id: str, reason: str, *, agent_id: str | None = None,
                       session_id: str | None = None) -> None:
        value: dict = {"reason": reason}
        if agent_id is not None:
            value["agentId"] = agent_id
        if session_id is not None:
            value["sessionId"] = session_id
        self.publish_change("account/" + account_id, value)

"""Per-account shares of outbound fetches: at most N web fetches (page reads, `fromUrl` writes,
downloads) of one account at once, however many it starts; the others wait, within their own
deadline. Together with a connection pool per purpose (server/runtime/runner.py), one account's
slow pages can neither hold the connections another account's fetches need nor touch the
providers' pool a model turn uses."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class AccountSlots:
    def __init__(self, per_account: int) -> None:
        self.per_account = per_account
        self._held: dict[str, tuple[asyncio.Semaphore, int]] = {}   # account -> (its slots, users)
        self.running = self.waiting = 0   # over all accounts (seed_agents_web_fetches)

    @contextlib.asynccontextmanager
    async def slot(self, account: str, until: float | None = None) -> AsyncIterator[None]:
        """One of the account's slots, held for the block; waiting for it is the caller's time
        (TimeoutError at loop time `until`, when given)."""
        sem, users = self._held.get(account) or (asyncio.Semaphore(self.per_account), 0)
        self._held[account] = (sem, users + 1)
        try:
            self.waiting += 1
            try:
                async with asyncio.timeout_at(until):
                    await sem.acquire()
            finally:
                self.waiting -= 1
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1
                sem.release()
        finally:
            sem, users = self._held[account]
            if users <= 1:
                del self._held[account]   # no entry is kept for an account with nothing going
            else:
                self._held[account] = (sem, users - 1)

    def busy(self, account: str) -> int:
        """Fetches of the account holding or waiting for a slot (for tests and metrics)."""
        entry = self._held.get(account)
        return entry[1] if entry else 0

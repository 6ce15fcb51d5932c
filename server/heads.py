"""Signed session heads (docs/protocol.md, "Verifiable history"): the server key, and a head
signed when someone asks for it, then kept until it is replaced. The write path pays one hash
per event (server/store/events.py) and never a signature: a head at (session, seq) never
changes, so the cache needs no invalidation, only its byte bound."""
from __future__ import annotations

from collections.abc import Callable

from seed_agents.protocol.api import history
from seed_agents.protocol.wire.keys import Keypair

from .cache import ENTRY_OVERHEAD, ByteBudgetCache

_HEAD_BYTES = ENTRY_OVERHEAD + 300   # a signed head: ids, a CID text, a 64-byte signature


class Heads:
    def __init__(self, key: Keypair, now_ms: Callable[[], int], budget: int) -> None:
        self.key = key
        self.now_ms = now_ms
        self.cache = ByteBudgetCache("session_heads", budget)

    @property
    def public_id(self) -> str:
        """The server key as the protocol names keys (`z6Mk...`), for health and /api/version."""
        return self.key.account_id

    def signed(self, session_id: str, seq: int, link: bytes) -> dict:
        """The signed head {sessionId, seq, head, ts, sig} of `session_id` at `seq`."""
        cache_key = (session_id, seq, link)
        head = self.cache.get(cache_key)
        if head is None:
            head = history.sign_head(self.key, session_id, seq, link, self.now_ms())
            self.cache.put(cache_key, head, _HEAD_BYTES)
        return head

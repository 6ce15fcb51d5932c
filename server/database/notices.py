"""Notice subscriptions and the in-process bus (the SQLite driver's: one process, one server).

A subscription is a bounded queue. A subscriber that falls more than `max_pending` notices
behind loses them, and is told so with one Resync instead: it re-reads what it follows from the
database, which holds every durable event. So a stuck subscriber costs bounded memory and never
a silent gap.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_MAX_PENDING = 10_000
# A notice's encoded size limit: PostgreSQL's NOTIFY payload must stay under 8000 bytes.
MAX_NOTICE_BYTES = 7900


@dataclass(frozen=True)
class Notice:
    """A small cross-server message: `topic` (e.g. "sessions/<id>") and a JSON-able `data` map.

    Durable events travel as a notice naming the seq; subscribers read the bytes back from the
    database, so replay-then-live keeps its order, no gap and no duplicate. Partials, which are
    never stored, may travel in `data` itself."""

    topic: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Resync:
    """Told to subscribers when notices may have been missed (a lost LISTEN connection that was
    reconnected, a subscriber that fell behind): each must re-read what it follows from the
    database past its last seq."""

    reason: str


def encode_notice(notice: Notice) -> str:
    """The wire form (a NOTIFY payload): compact JSON, refused past the NOTIFY size limit."""
    text = json.dumps({"t": notice.topic, "d": notice.data}, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_NOTICE_BYTES:
        raise ValueError(f"notice for {notice.topic!r} is {len(text.encode())} bytes; the limit is "
                         f"{MAX_NOTICE_BYTES} (send a reference and keep the data in the database)")
    return text


def decode_notice(text: str) -> Notice:
    value = json.loads(text)
    return Notice(value["t"], value.get("d") or {})


class Subscription:
    """What `NoticeBus.subscribe` returns: `await get()` the next Notice or Resync."""

    def __init__(self, on_close: Callable[[Subscription], None], max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self._queue: asyncio.Queue = asyncio.Queue()
        self._on_close = on_close
        self._max_pending = max_pending
        self.closed = False

    def deliver(self, item: Notice | Resync) -> None:
        if self.closed:
            return
        if isinstance(item, Resync) or self._queue.qsize() >= self._max_pending:
            if isinstance(item, Notice):
                item = Resync("subscriber fell behind; notices were dropped")
            # Whatever is queued is superseded by the re-read the Resync asks for.
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(item)
            return
        self._queue.put_nowait(item)

    async def get(self) -> Notice | Resync:
        return await self._queue.get()

    def pending(self) -> int:
        return self._queue.qsize()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._on_close(self)


class LocalNoticeBus:
    """Notices within one process, delivered in publication order to every subscription."""

    def __init__(self, max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self._subs: set[Subscription] = set()
        self._max_pending = max_pending

    async def publish(self, notice: Notice) -> None:
        self.publish_now(notice)

    def publish_now(self, notice: Notice) -> None:
        encode_notice(notice)  # the same size rule as PostgreSQL, so code cannot rely on more
        for sub in list(self._subs):
            sub.deliver(notice)

    async def subscribe(self) -> Subscription:
        sub = Subscription(self._subs.discard, self._max_pending)
        self._subs.add(sub)
        return sub

"""One subscription: an async iterator of event maps for one key, across reconnects.

What the caller sees, in order (CONTRACT section 5), one event per item:

- `{_: "change", key, value}` (for a session: its SessionInfo, first, then on every change);
- `{_: "append", key, event: SessionEvent}`: every durable event exactly once, ascending `seq`,
  replay batches flattened;
- `{_: "replayed", key, seq}` once the replay is over (also readable as `sub.replayed_seq`);
- `{_: "appendPartial", key, partialId, patch}`: live-only streaming text.

After a reconnect the client subscribes again with `afterSeq = sub.delivered_seq`, so the
server sends a fresh `change` and `replayed` but no durable event twice and none missing:
appends at or below the last seq already buffered or delivered are dropped here. Partials
sent while the socket was down are lost (they are never stored).

The buffer is bounded. When it is full the client stops reading the socket until the caller
catches up; the server then cuts the socket off (close 1013) and the client resumes with
`afterSeq`. So a stalled caller costs a reconnect, never memory, but it also stalls responses
on that client: consume subscriptions in their own task.
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Protocol

from .errors import HistoryError
from .history import Follower
from .wire import append_seq, flatten

DEFAULT_BUFFER = 1024


class Unsubscriber(Protocol):
    """What a subscription needs of its client (seed_agents.clients.transport.Transport): a way to end it."""

    async def _unsubscribe(self, sub: "Subscription") -> None: ...

    async def request(self, action: dict) -> dict: ...   # (the history check names a bad event)


class Subscription:
    def __init__(self, client: Unsubscriber, key: str, after_seq: int | None,
                 maxsize: int = DEFAULT_BUFFER) -> None:
        self.key = key
        self.is_session = key.startswith("sessions/")
        self.after_seq = after_seq
        self.delivered_seq = after_seq or 0   # last durable seq handed to the caller
        self._buffered_seq = self.delivered_seq  # last durable seq put in the buffer
        self.replayed_seq: int | None = None  # seq of the latest `replayed` marker
        self._client = client
        self._maxsize = max(1, maxsize)
        self._items: deque[dict] = deque()
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._ended = False
        self._error: BaseException | None = None
        self.active = False  # subscribed on the client's current socket
        self.confirmed = False  # the first Subscribe succeeded, so reconnects resubscribe it
        # With a pinned server key (clients/history.py): the session's chain as replayed, each
        # signed head checked against it; None: nothing checked.
        self.follower: Follower | None = None
        self._locating: asyncio.Future | None = None

    # -- reader side (the client's socket loop) ---------------------------------------------
    async def _feed(self, frame: dict, bodies: list[bytes] | None = None) -> None:
        """`bodies`: each event's bytes as received (clients/wire.read_frame), in order."""
        for index, item in enumerate(flatten(frame)):
            seq = append_seq(item) if self.is_session else None
            if seq is not None:
                if seq <= self._buffered_seq:
                    continue  # already buffered or delivered: a resumed replay overlaps
                self._buffered_seq = seq
                body = bodies[index] if bodies is not None and index < len(bodies) else None
                if self.follower is not None and not self._follow("add", item["event"], body):
                    return
            elif item.get("_") == "replayed":
                self.replayed_seq = item.get("seq")
                if self.follower is not None and "head" in item and not self._follow("head", item["head"]):
                    return
            while len(self._items) >= self._maxsize and not self._ended:
                self._room.clear()
                await self._room.wait()  # back-pressure: the socket is not read meanwhile
            if self._ended:
                return
            self._items.append(item)
            self._readable.set()

    def _follow(self, step: str, value: dict, body: bytes | None = None) -> bool:
        """One step of the pinned-key check (clients/history.py); a failure ends the subscription
        with a HistoryError naming the event, found by a task of its own (the socket's reader
        must go on reading for that task's requests to be answered)."""
        try:
            if step == "add":
                self.follower.add(value, body)
            else:
                self.follower.head(value)
        except HistoryError as caught:
            error = caught   # (the except clause unbinds `caught`; the task below reads it later)
            follower, self.follower = self.follower, None

            async def name_it() -> None:
                try:
                    named = await follower.locate(self._client.request, error)
                except Exception:  # noqa: BLE001  (the check failed either way; say what is known)
                    named = error
                self._end(named)

            self._locating = asyncio.ensure_future(name_it())
            return False
        return True

    def _end(self, error: BaseException | None = None, *, discard: bool = False) -> None:
        """No more items: the caller gets what is buffered (unless `discard`), then `error`
        raised, or the end of iteration."""
        if self._ended:
            return
        self._ended = True
        self.active = False
        self._error = error
        if discard:
            self._items.clear()
        self._readable.set()
        self._room.set()

    @property
    def closed(self) -> bool:
        return self._ended

    # -- caller side -----------------------------------------------------------------------
    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> dict:
        while True:
            if self._items:
                item = self._items.popleft()
                if len(self._items) < self._maxsize:
                    self._room.set()
                seq = append_seq(item) if self.is_session else None
                if seq is not None:
                    if seq <= self.delivered_seq:
                        continue  # defensive: never hand the caller a durable event twice
                    self.delivered_seq = seq
                return item
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._readable.clear()
            await self._readable.wait()

    async def next(self, timeout: float | None = None) -> dict:
        """The next item, waiting at most `timeout` seconds (TimeoutError after)."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    async def close(self) -> None:
        """Stop: buffered items are dropped, iteration ends, and the server is told with an
        unsigned `{id, _: "Unsubscribe", key}` when the socket is up."""
        await self._client._unsubscribe(self)

    async def __aenter__(self) -> "Subscription":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "ended" if self._ended else ("active" if self.active else "resuming")
        return f"<Subscription {self.key} {state} delivered_seq={self.delivered_seq}>"


__all__ = ["Subscription", "DEFAULT_BUFFER"]


def route(subs: dict, frame: dict):
    """The subscription an event frame arrived for. The server sends an event once per socket,
    through the most specific subscription that covers it (CONTRACT section 5): the event's own
    key, else the run tree it belongs to, else `agents/<id>` (changes of its sessions and
    notices naming it), else `account/<id>`. Events keep their own key, so this retraces it."""
    key = frame.get("key")
    sub = subs.get(key)
    if sub is not None or type(key) is not str:
        return sub
    value = frame.get("value") if frame.get("_") == "change" else None
    if type(value) is dict:
        if key.startswith("runs/") and value.get("rootRunId"):
            sub = subs.get("runs/" + str(value["rootRunId"]))
        elif value.get("agentId") and not key.startswith("runs/"):
            sub = subs.get("agents/" + str(value["agentId"]))
        if sub is not None:
            return sub
    for name, sub in subs.items():   # a socket acts for one account: at most one such key
        if name.startswith("account/"):
            return sub
    return None


"""One socket's subscriptions (`Subscribe`, `Unsubscribe`): a verified Subscribe starts a stream
(replay from `afterSeq`, then live), registered in the hub before its replay reads so nothing
published is missed; at most `--max-subscriptions-per-socket`; one per key (a new Subscribe to
a key replaces the old). The transport hands every answered action here first (`answer`), and
knows no action itself."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from seed_agents.protocol.wire.events import error_response

from .broadcaster import Broadcaster
from .grants import Grants
from .hub import Hub
from .subscriptions import RunTreeSubscription, SessionSubscription, Subscription

log = logging.getLogger("seed_agents.connection")

__all__ = ["LiveParts", "Streams"]


class LiveParts(Protocol):
    """What a socket's streams need of the server, declared here (the App fills it): the store's
    reads, the hub, the live grants, the local sink (a session deleted under a replay), the
    session heads' key, the metrics, the limits and the kept replay frames."""

    @property
    def db(self) -> Any: ...        # a server/database/port.Storage
    @property
    def hub(self) -> Hub: ...
    @property
    def grants(self) -> Grants: ...
    @property
    def broadcaster(self) -> Broadcaster: ...
    @property
    def heads(self) -> Any: ...     # server/heads.Heads, None until the server key is read
    @property
    def metrics(self) -> Any: ...
    @property
    def config(self) -> Any: ...    # its `limits`
    @property
    def cache(self) -> dict: ...    # the in-memory caches by name: `replay_frames` (live/replay_frames.py)


class Streams:
    """`conn`: the socket (its framing, `send`, `spawn`, `send_event`, `outbound`); `app`: the
    server's parts its streams read through (`LiveParts`)."""

    __slots__ = ("app", "conn", "subs")

    def __init__(self, app: LiveParts, conn) -> None:  # noqa: ANN001
        self.app = app
        self.conn = conn
        self.subs: dict[str, Subscription] = {}

    def answer(self, outcome, request) -> bool:
        """Take an action's outcome when it starts a stream (an accepted Subscribe): its answer
        goes out from here, then the replay. False for any other outcome, which the socket answers."""
        envelope = outcome.envelope
        if envelope is None or envelope.name != "Subscribe" or outcome.response.get("_") == "Error":
            return False
        self._start(outcome.action, envelope.account_id, outcome.response, request)
        return True

    def unsubscribe(self, key: str) -> None:
        sub = self.subs.get(key)
        if sub is not None:
            self.drop(key, sub)

    def drop_all(self) -> None:
        for key, sub in list(self.subs.items()):
            self.drop(key, sub)

    def _start(self, action, account_id: str, response: dict, request) -> None:
        conn, app = self.conn, self.app
        key = action.key
        if conn.outbound.closed:   # closed while Subscribe awaited (e.g. its signer unregistered)
            return
        limit = app.config.limits.subs_per_socket
        if key not in self.subs and len(self.subs) >= limit:
            err = error_response(429, f"too many subscriptions on this connection (limit {limit})")
            conn.send(conn.framing.subscribe_failed(request, err))
            return
        old = self.subs.get(key)
        if old is not None:
            self.drop(key, old)
        if action.kind == "sessions":
            sub: Subscription = SessionSubscription(conn, app, key, action.target, action.after_seq or 0)
        elif action.kind == "runs":
            sub = RunTreeSubscription(conn, app, key)
        else:
            sub = Subscription(conn, app, key)
        conn.send(conn.framing.subscribed(request, key, account_id, response))
        self.subs[key] = sub
        app.hub.add(key, sub)  # before the replay reads, so nothing published is missed
        app.grants.track(sub)  # its role; a guest's is indexed for revocation (grants.py)
        app.metrics.subscriptions.inc()
        sub.task = conn.spawn(self._run(sub))

    async def _run(self, sub: Subscription) -> None:
        try:
            await sub.start()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("subscription %s failed", sub.key)
            self.conn.send(self.conn.framing.error_event(f"subscription {sub.key} failed", 500))
            self.drop(sub.key, sub)

    def drop(self, key: str, sub: Subscription) -> None:
        if self.subs.get(key) is sub:
            del self.subs[key]
            self.app.metrics.subscriptions.dec()
        self.app.hub.remove(key, sub)
        self.app.grants.untrack(sub)
        if sub.task is not None and sub.task is not asyncio.current_task():
            sub.task.cancel()

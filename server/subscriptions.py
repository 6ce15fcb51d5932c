"""One socket's subscription to one key: replay from afterSeq, then live, with no gap and no
duplicate whatever is appended meanwhile.

Durable appends are filtered by seq: while replaying, live appends are ignored (the replay
reads them from the database); after it, an append at or below the last seq sent is a
duplicate and is dropped, and one past a gap first pulls the missing events from the
database. The switch from replay to live happens with no await between the last database
read and the flag flip, and a publish always follows its commit, so nothing falls between.
"""
from __future__ import annotations

import asyncio
import logging

from protocol import events
from server.frames import Outgoing
from server.wsconn import ws_frame
from server.store import agents as agents_q
from server.store import codec
from server.store import events as events_q
from server.store import runs as runs_q
from server.store import sessions as sessions_q

log = logging.getLogger("seed_agents.subscriptions")

REPLAY_PAGE_BYTES = 1 << 20   # a replay frame holds at most this much (or `replay_page` events)


class Subscription:
    """Non-session keys: everything published on the key goes out live.

    No seq filtering: an `account/` or `agents/` key receives events of many sessions (their
    appends carry their own session's seq), and none of them is replayed on such a key. Their
    appends are sent untracked, so they never move a `sessions/` stream's "last seq sent"."""

    def __init__(self, conn, key: str) -> None:
        self.conn = conn
        self.key = key
        self.task: asyncio.Task | None = None

    def deliver(self, event: Outgoing) -> None:
        self.conn.send_event(event, track=False)

    def follows(self, key: str) -> bool:
        return key in self.conn.subs

    async def start(self) -> None:
        kind, _, ident = self.key.partition("/")
        current = None
        if kind == "agents":
            current = self.conn.app.db.read(agents_q.get_agent, ident)
        elif kind == "runs":
            current = self.conn.app.db.read(runs_q.get_run, ident)
        if current is not None:
            self.conn.send_event(Outgoing(self.key, events.change(self.key, current)), bounded=False)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()


class SessionSubscription(Subscription):
    def __init__(self, conn, key: str, session_id: str, after_seq: int) -> None:
        super().__init__(conn, key)
        self.session_id = session_id
        self.after_seq = after_seq
        self.last_seq = after_seq      # last durable seq queued to the socket
        self.replaying = True
        self.missed_change = False

    def deliver(self, event: Outgoing) -> None:
        if self.replaying:
            if event.seq == 0 and event.value.get("_") == "change":
                self.missed_change = True
            return  # appends come from the database; partials are live-only
        seq = event.seq
        if seq:
            if seq <= self.last_seq:
                return
            if seq > self.last_seq + 1:
                self._fill_gap(seq - 1)
            self.last_seq = seq
            self.conn.send_event(event)
        else:
            self.conn.send_event(event)

    def _fill_gap(self, upto: int) -> None:
        app = self.conn.app
        rows = app.db.read(events_q.event_bodies_after, self.session_id, self.last_seq, upto - self.last_seq)
        for seq, body in rows:   # rare: decoded for every framing alike
            self.conn.send_event(Outgoing(self.key, events.append(self.key, codec.decode(body)),
                                          seq=seq, body=bytes(body)))
            self.last_seq = seq

    async def start(self) -> None:
        self.task = asyncio.current_task()
        conn, app = self.conn, self.conn.app
        session = app.db.read(sessions_q.get_session, self.session_id)
        conn.send_event(Outgoing(self.key, events.change(self.key, session)), bounded=False)
        conn.outbound.last_sent.setdefault(self.key, self.after_seq)
        page = app.config.limits.replay_page
        sent = 0
        while not conn.outbound.closed:
            rows, more = app.db.read(events_q.event_bodies_page, self.session_id, self.last_seq, page,
                                     REPLAY_PAGE_BYTES)
            if rows:
                self._send_page(rows)
                sent += len(rows)
                self.last_seq = rows[-1][0]
            if not more:
                break  # no await from that read to the flip below
            await conn.outbound.wait_room()
        self.replaying = False
        app.metrics.replayed.inc(sent)
        conn.send(conn.framing.replayed(self.key, self.last_seq), bounded=False)   # v2 only: None in v1
        if self.missed_change:
            session = app.db.read(sessions_q.get_session, self.session_id)
            conn.send_event(Outgoing(self.key, events.change(self.key, session)), bounded=False)

    def _send_page(self, rows: list) -> None:
        conn, key = self.conn, self.key
        for message, seq in conn.framing.replay(key, rows):   # v2: one batched frame; v1: one each
            conn.outbound.put(ws_frame(message), key, seq, bounded=False)

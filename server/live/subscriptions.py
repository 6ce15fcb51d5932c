"""One socket's subscription to one key: replay from afterSeq, then live, with no gap and no
duplicate whatever is appended meanwhile.

Durable appends are filtered by seq: while replaying, live appends are ignored (the replay
reads them from the database); after it, an append at or below the last seq sent is a
duplicate and is dropped, and one past a gap first pulls the missing events from the
database. The switch from replay to live happens with no await between the last database
read and the flag flip, and a publish always follows its commit, so nothing falls between.

Across servers (server/live/cluster.py) the same holds: another server's append is published here
only after this server read it from the database, so after its commit; and appends of two
servers may arrive out of order (seq 6 before 5), which the gap fill and the seq filter absorb
(5 committed before 6 was assigned: the per-session counter row). A lost notice stream
(`Resync`) is made good by `catch_up`.
"""
from __future__ import annotations

import asyncio
import logging

from seed_agents.protocol.wire import events
from seed_agents.protocol.api.actions import MAX_DEFINITION_BYTES
from seed_agents.protocol.wire.ws_frame import ws_frame

from ..store import agents as agents_q
from ..store import codec
from ..store import events as events_q
from ..store import history as history_q
from ..store import journal as journal_q
from ..store import runs as runs_q
from ..store import sessions as sessions_q
from .frames import Outgoing
from .replay_frames import SHARED_GAP, aligned_limit

log = logging.getLogger("seed_agents.subscriptions")

REPLAY_PAGE_BYTES = 1 << 20   # a replay frame holds at most this much (or `replay_page` events)
CHANGE_BYTES = 16 * 1024      # a `change` frame, at most (SessionInfo, RunInfo; AgentInfo adds its definition)


def replay_page_bytes(max_bytes: int) -> int:
    """A replay page's byte bound for a socket whose outbound bound is `max_bytes`: a page is
    queued only once the socket is down to its low-water mark (1/8 of the bound), so with pages
    of at most a quarter of the bound a replay that keeps up never crosses it."""
    return min(REPLAY_PAGE_BYTES, max(16 * 1024, max_bytes // 4))


class Subscription:
    """Non-session keys: everything published on the key goes out live.

    No seq filtering: an `account/` or `agents/` key receives events of many sessions (their
    appends carry their own session's seq), and none of them is replayed on such a key. Their
    appends are sent untracked, so they never move a `sessions/` stream's "last seq sent"."""

    # The subscriber's role on what the key names (server/live/grants.py sets it, and changes it
    # when a grant changes); `agent_id` is set for a subscriber that is not the owner.
    role = "owner"
    agent_id: str | None = None

    def __init__(self, conn, parts, key: str) -> None:  # noqa: ANN001 (parts: streams.LiveParts)
        self.conn = conn
        self.parts = parts   # the server's parts a stream reads through (server/live/streams.LiveParts)
        self.key = key
        self.task: asyncio.Task | None = None

    def deliver(self, event: Outgoing) -> None:
        variants = event.variants
        if variants is not None:   # an AgentInfo change: this subscriber's accessRole
            event = variants.get(self.role, event)
        self.conn.send_event(event, track=False)

    def follows(self, key: str) -> bool:
        return key in self.conn.subs

    async def start(self) -> None:
        kind, _, ident = self.key.partition("/")
        current = None
        # The current value waits for room like a replay page (an AgentInfo can be 256 KiB), before
        # it is read, so no newer change published meanwhile can precede it.
        await self.conn.outbound.wait_fits(CHANGE_BYTES + (MAX_DEFINITION_BYTES if kind == "agents" else 0))
        if kind == "agents":
            current = self.parts.db.read(agents_q.get_agent, ident, self.role)
        elif kind == "runs":
            current = self.parts.db.read(runs_q.get_run, ident)
        if current is not None:
            self.conn.send_event(Outgoing(self.key, events.change(self.key, current)), bounded=False)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()


class RunTreeSubscription(Subscription):
    """`runs/<id>`: every run of the tree as it is now (a `change` each, oldest first), then its
    journal (the latest REPLAY_JOURNAL entries), then live changes and journal appends.

    What is published before the snapshot is read is dropped: every publication follows its
    commit, so the snapshot, read later, already holds it. The snapshot is read and queued with
    no await in between, so nothing published after the read can come before the flip."""

    REPLAY_JOURNAL = 2_000

    def __init__(self, conn, parts, key: str) -> None:  # noqa: ANN001
        super().__init__(conn, parts, key)
        self.replaying = True

    def deliver(self, event: Outgoing) -> None:
        if not self.replaying:
            super().deliver(event)

    async def start(self) -> None:
        self.task = asyncio.current_task()
        conn, app = self.conn, self.parts
        ident = self.key.partition("/")[2]
        await conn.outbound.wait_fits(replay_page_bytes(conn.outbound.max_bytes))
        run = app.db.read(runs_q.get_run, ident)   # no await from here to the flip below
        if run is not None:
            tree = app.db.read(runs_q.runs_of_tree, run["rootRunId"], None, 10_000)
            if run["id"] != run["rootRunId"]:   # a subtree's own key
                tree = [run, *runs_q.descendants(tree, run["id"])]
            for r in tree:
                conn.send_event(Outgoing(self.key, events.change(self.key, runs_q.public(r))), bounded=False)
            wanted = {r["id"] for r in tree}
            entries = [e for e in app.db.read(journal_q.tree_entries, run["rootRunId"], self.REPLAY_JOURNAL)
                       if e["runId"] in wanted][-self.REPLAY_JOURNAL:]
            for entry in entries:
                conn.send_event(Outgoing(self.key, events.journal_append(self.key, entry)), bounded=False)
        self.replaying = False


class SessionSubscription(Subscription):
    def __init__(self, conn, parts, key: str, session_id: str, after_seq: int) -> None:  # noqa: ANN001
        super().__init__(conn, parts, key)
        self.session_id = session_id
        self.after_seq = after_seq
        self.last_seq = after_seq      # last durable seq queued to the socket
        self.replaying = True
        self.missed_change = False
        self.agent_of_session: str | None = None   # read at start (a deletion notice names it)
        self.created_at = None   # the session's createdAt, read at start (what kept frames belong to)

    def deliver(self, event: Outgoing) -> None:
        if self.replaying:
            if event.seq == 0 and event.value.get("_") == "change":
                if (event.value.get("value") or {}).get("reason") == "session-deleted":
                    # Deleted under the replay (on a shared store a page may be away on a reader
                    # thread): the notice goes out now and the replay ends, as it would live.
                    self.conn.send_event(event, bounded=False)
                    self.conn.streams.drop(self.key, self)
                    return
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

    def _fill_gap(self, upto: int) -> int:
        app, after = self.parts, self.last_seq

        def read() -> list[Outgoing]:   # rare: decoded for every framing alike
            rows = app.db.read(events_q.event_bodies_after, self.session_id, after, upto - after)
            return [Outgoing(self.key, events.append(self.key, codec.decode(body)), seq=seq, body=bytes(body))
                    for seq, body in rows]

        # a short live gap is the same for every subscriber of the session: read and framed once
        filled = app.cache["replay_frames"].gap(self.session_id, after, upto, read) \
            if upto - after <= SHARED_GAP else read()
        for event in filled:
            self.conn.send_event(event)
            self.last_seq = event.seq
        return len(filled)

    def catch_up(self) -> None:
        """Notices from other servers may have been lost (a Resync): send what the database
        holds past the last seq sent, and the session as it is now. A session deleted
        meanwhile ends the subscription with the deletion notice, as it would have live."""
        if self.replaying or self.conn.outbound.closed:
            return   # a replay reads the database anyway
        app = self.parts
        session = app.db.read(sessions_q.get_session, self.session_id)
        if session is None:
            if self.agent_of_session is not None:
                app.broadcaster.local.gone(self.key, {"reason": "session-deleted", "agentId": self.agent_of_session,
                                             "sessionId": self.session_id})
            return
        page = app.config.limits.replay_page
        while not self.conn.outbound.closed and self._fill_gap(self.last_seq + page) == page:
            pass   # a slow consumer is cut off by its outbound bound, as with live events
        self.conn.send_event(Outgoing(self.key, events.change(self.key, session)))

    async def _read(self, on_loop: bool, fn, *args):  # noqa: ANN001, ANN202
        """A replay read: on the loop (`read`), or on a reader thread (`aread`, a shared store's
        round trip). On the loop it never suspends: awaiting it then yields nothing to the loop."""
        if on_loop:
            return self.parts.db.read(fn, *args)
        return await self.parts.db.aread(fn, *args, large=True)

    async def _page(self, page: int, page_bytes: int, derived, on_loop: bool) -> tuple[list[tuple[bytes, int]], int, bool]:  # noqa: ANN001
        """The next replay page after `last_seq`: its frames with the seq each ends on, how many
        events, and whether more may follow (only a page read from the database says no)."""
        conn = self.conn
        if derived is not None:   # v1: frames kept from an earlier replay, while the session holds their events
            kept = derived.kept(self.session_id, self.created_at, self.last_seq, page, page_bytes)
            if kept is not None and await self._read(on_loop, events_q.holds_range, self.session_id,
                                                     self.last_seq + 1, kept[1]):
                return [kept], kept[1] - self.last_seq, True
        limit = page if derived is None else aligned_limit(self.last_seq, page)
        if derived is not None:   # v1: the page's bodies in one value, decoded at once (a plain page)
            joined = await self._read(on_loop, events_q.event_bodies_joined, self.session_id, self.last_seq, limit,
                                      page_bytes)
            if joined is not None:
                first, count, bodies, more = joined
                frames = derived.page_joined(conn.framing, self.key, self.session_id, self.created_at, first, count,
                                             bodies)
                if frames is not None:
                    return frames, count, more
        rows, more = await self._read(on_loop, events_q.event_bodies_page, self.session_id, self.last_seq, limit,
                                      page_bytes)
        if not rows:
            return [], 0, more
        if derived is None:   # v2: one batched frame, its WebSocket header added here
            return [(ws_frame(m), seq) for m, seq in conn.framing.replay(self.key, rows)], len(rows), more
        # v1: a frame per event, derived (or kept), run by run
        return derived.page(conn.framing, self.key, self.session_id, self.created_at, rows), len(rows), more

    async def start(self) -> None:
        self.task = asyncio.current_task()
        conn, app = self.conn, self.parts
        outbound = conn.outbound
        # Replay stays within the socket's outbound bound: a page is built, then queued only
        # when it fits under the bound (else the replay waits for the socket to drain and reads
        # it again), so a client that does not read holds at most the bound; live events on top
        # cut it off with 1013 naming the last seq it was sent, as any slow consumer.
        outbound.last_sent.setdefault(self.key, self.after_seq)
        await outbound.wait_fits(CHANGE_BYTES)
        session = app.db.read(sessions_q.get_session, self.session_id)   # no await from here to the send
        if session is not None:
            self.agent_of_session = session["agentId"]
            self.created_at = session["createdAt"]
        conn.send_event(Outgoing(self.key, events.change(self.key, session)), bounded=False)
        page = app.config.limits.replay_page
        page_bytes = replay_page_bytes(outbound.max_bytes)
        # v1 derives each event's frame (JSON): kept per stored event (server/live/replay_frames.py)
        derived = app.cache["replay_frames"] if conn.framing.replay_derives else None
        need = page_bytes
        sent = 0
        # On a shared store a page is a round trip: read on a reader thread while the loop serves
        # others. Appends published meanwhile are not sent (deliver: still replaying), so the
        # switch to live must follow a read on the loop itself, with no await between the two:
        # once a page off the loop says it was the last, one more page is read on the loop
        # (usually empty), and only a last page read there ends the replay.
        on_loop = not app.db.shared
        while True:
            await outbound.wait_fits(need)
            if outbound.closed:
                return
            frames, count, more = await self._page(page, page_bytes, derived, on_loop)
            if outbound.closed:
                return
            need = sum(len(frame) for frame, _seq in frames)
            if not outbound.fits(need):
                continue  # bigger than planned (one big event): wait for that much room, read again
            for frame, seq in frames:
                outbound.put(frame, self.key, seq, bounded=False)   # it fits (checked above)
            if count:
                sent += count
                self.last_seq = frames[-1][1]
            need = page_bytes
            if not more:
                if on_loop:
                    break  # no await from that read to the flip below
                on_loop = True   # the seam: the next page is read on the loop
            await asyncio.sleep(0)   # the page goes out now (the first event early), and others are served
        self.replaying = False
        app.metrics.replayed.inc(sent)
        head = None
        if self.last_seq and app.heads is not None and conn.framing.subprotocol is not None:   # (v1: no marker)
            seq, link = app.db.read(history_q.head_at, self.session_id, self.last_seq)
            head = None if link is None else app.heads.signed(self.session_id, seq, link)
        conn.send(conn.framing.replayed(self.key, self.last_seq, head), bounded=False)   # v2 only: None in v1
        if self.missed_change:
            session = app.db.read(sessions_q.get_session, self.session_id)
            conn.send_event(Outgoing(self.key, events.change(self.key, session)))

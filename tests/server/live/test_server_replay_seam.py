"""The replay/live seam when replay pages are read off the loop (a shared store, PostgreSQL):
an append committed and published while a page is being read on a reader thread is not lost
and not sent twice (server/live/subscriptions.py, SessionSubscription.start).

Fakes stand in for the socket and the storage, so the append lands at the worst moment every
time: the storage's `aread` takes its snapshot, then, before it returns, the next event commits
and is published to the subscription (which is still replaying). Without the last read on the
loop before going live, that event would be dropped here and only a later append's gap fill
would bring it.
"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from seed_agents.protocol.wire import events
from seed_agents.server.live.frames import Outgoing
from seed_agents.server.live.subscriptions import SessionSubscription
from seed_agents.server.store import events as events_q
from seed_agents.server.store import history as history_q
from seed_agents.server.store import sessions as sessions_q

SID = "s1"
KEY = "sessions/" + SID


class Store:
    """Events by seq; `read` on the loop, `aread` with a commit slipped in after its snapshot."""

    def __init__(self, shared: bool, events_now: int, page: int) -> None:
        self.shared = shared
        self.seqs = list(range(1, events_now + 1))
        self.page = page
        self.sub: SessionSubscription | None = None
        self.commits_during_aread = 0
        self.areads = 0
        self.reads = 0

    def _answer(self, fn, args):
        if fn is events_q.event_bodies_page:
            _sid, after, limit, _bytes = args
            rows = [(s, b"body %d" % s) for s in self.seqs if s > after]
            return rows[:limit], len(rows) > limit
        if fn is sessions_q.get_session:
            return {"id": SID, "agentId": "a1", "lastSeq": len(self.seqs), "createdAt": 1}
        if fn is history_q.head_at:
            return self.seqs[-1] if self.seqs else 0, None
        raise AssertionError(f"unexpected read {fn}")

    def commit_and_publish(self) -> None:
        seq = len(self.seqs) + 1
        self.seqs.append(seq)
        event = {"seq": seq, "event": {"role": "user", "content": str(seq)}}
        self.sub.deliver(Outgoing(KEY, events.append(KEY, event), seq=seq, body=b"body %d" % seq))

    def read(self, fn, *args):
        self.reads += 1
        return self._answer(fn, args)

    async def aread(self, fn, *args, large=False):
        self.areads += 1
        value = self._answer(fn, args)          # the snapshot
        if self.commits_during_aread:
            self.commits_during_aread -= 1
            self.commit_and_publish()           # committed after it, published during the await
        await asyncio.sleep(0)
        return value


class Outbound:
    closed = False
    max_bytes = 1 << 24

    def __init__(self) -> None:
        self.last_sent: dict = {}
        self.seqs: list[int] = []

    async def wait_fits(self, n: int) -> None:
        await asyncio.sleep(0)

    def fits(self, n: int) -> bool:
        return True

    def put(self, frame, key, seq, bounded=True) -> None:
        self.seqs.append(seq)


class Conn:
    def __init__(self) -> None:
        self.outbound = Outbound()
        self.framing = SimpleNamespace(
            replay=lambda key, rows: [(b"m%d" % seq, seq) for seq, _body in rows],
            subprotocol=None, replayed=lambda key, seq, head: None, replay_derives=False)
        self.live: list[int] = []

    def send_event(self, event: Outgoing, bounded: bool = True, track: bool = True) -> None:
        if event.seq:
            self.live.append(event.seq)

    def send(self, frame, bounded: bool = True) -> None:
        pass


async def replay(shared: bool, events_now: int, page: int, commits: int) -> tuple[list[int], Store]:
    store = Store(shared, events_now, page)
    conn = Conn()
    parts = SimpleNamespace(db=store, config=SimpleNamespace(limits=SimpleNamespace(replay_page=page)),
                            metrics=SimpleNamespace(replayed=SimpleNamespace(inc=lambda n: None)), heads=None)
    sub = SessionSubscription(conn, parts, KEY, SID, 0)
    store.sub = sub
    store.commits_during_aread = commits
    await asyncio.wait_for(sub.start(), 10)
    return conn.outbound.seqs + conn.live, store


async def test_an_append_published_while_the_last_page_is_read_off_the_loop_is_sent_once():
    # Every page read off the loop has an append slipped in after its snapshot, the last one too.
    for events_now, page in ((0, 5), (3, 5), (12, 5), (10, 5)):
        got, store = await replay(True, events_now, page, commits=100)
        assert got == list(range(1, len(store.seqs) + 1)), (events_now, page, got)
        assert store.areads >= 1 and store.reads >= 1   # pages off the loop, the seam on it
    # A later append after the switch goes out live, once.
    got, store = await replay(True, 7, 5, commits=100)
    store.commit_and_publish()
    assert store.sub.conn.live[-1] == len(store.seqs) and got + [len(store.seqs)] == list(range(1, len(store.seqs) + 1))


async def test_on_sqlite_every_page_is_read_on_the_loop():
    got, store = await replay(False, 12, 5, commits=0)
    assert got == list(range(1, 13)) and store.areads == 0

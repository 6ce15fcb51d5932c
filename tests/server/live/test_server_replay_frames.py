"""v1 replay frames derived once per stored event (server/live/replay_frames.py): what a desktop
receives is the JSON of each stored event (its value, and byte for byte the text a live frame of
the stored map carries), one text message each, whether the frames were derived for it or kept
from an earlier replay, from any afterSeq; the kept frames stay within their budget."""
from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from seed_agents.protocol.wire import dagcbor, events
from seed_agents.protocol.wire.framing_v1 import V1Framing
from seed_agents.protocol.wire.ws_frame import ws_frame
from seed_agents.server.live.replay_frames import CHUNK, ReplayFrames, aligned_limit
from seed_agents.server.store import codec
from seed_agents.server.store import events as events_q

from tests.conftest import running_server, server_config
from tests.wsraw import V1, V2Client, keypair, setup_session

# A replay page is read as one value on each storage in its own SQL (events_q.event_bodies_joined).
pytestmark = pytest.mark.storages("sqlite", "postgresql")

N = 2 * CHUNK + 57   # two whole runs and a tail


def payload(i: int) -> dict:
    # non-ASCII text, a large integer, floats, nesting and bytes: what the JSON encoding has to get right
    return {"type": "message", "role": "assistant" if i % 2 else "user",
            "content": f"event {i}: h\u00e9llo \u2603 \"quoted\" \\ {'x' * (i % 50)}",
            "meta": {"provider": "echo", "model": "echo-1", "durationMs": i, "big": 2 ** 53 + i,
                     "list": [i, {"nested": None, "flag": i % 3 == 0}],
                     "floats": [i / 8, 1e16 * i, 1.5e-7, -0.0]},   # exponents: `1e16` (docs/protocol.md)
            **({"blob": bytes([i % 256, 0, 255])} if i % 7 == 0 else {})}


async def fill(app, session_id: str, n: int) -> None:
    def job(conn):
        for i in range(1, n + 1):
            events_q.append_event(conn, session_id, payload(i), str(uuid.uuid4()), 1_700_000_000_000 + i)

    await app.db.write(job)


def expected_texts(app, key: str, session_id: str, after_seq: int) -> list[str]:
    """The v1 text of each stored event past `after_seq`: checked here to parse to the stored
    value (read with the strict decoder; bytes as DAG-JSON), and to be the very text a live
    subscriber's frame of that stored map carries (the replay must send the same)."""
    rows = app.db.read(events_q.event_bodies_after, session_id, after_seq, 10 * N)
    texts = []
    for _seq, body in rows:
        stored = dagcbor.decode(bytes(body))
        text = V1Framing(1 << 20).event(events.append(key, stored))   # as a live event is framed
        assert json.loads(text) == {"_": "append", "key": key, "event": dag_json(stored)}
        texts.append(text)
    return texts


def dag_json(value):
    """A stored value as JSON carries it: bytes as DAG-JSON's {"/": {"bytes": ...}}."""
    if isinstance(value, dict):
        return {k: dag_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dag_json(v) for v in value]
    if isinstance(value, bytes):
        import base64
        return {"/": {"bytes": base64.b64encode(value).decode().rstrip("=")}}
    return value


async def replay_texts(url: str, kp, key: str, after_seq: int, n: int) -> list[str]:
    v1 = await V1.open(url)
    try:
        await v1.ws.send(_signed(kp, {"_": "Subscribe", "key": key, "afterSeq": after_seq}))
        texts: list[str] = []
        async with asyncio.timeout(60):
            while len(texts) < n:
                text = await v1.ws.recv()
                assert isinstance(text, str)   # every v1 message is a text frame
                if text.startswith('{"_":"append"'):
                    texts.append(text)
        return texts
    finally:
        await v1.close()


def _signed(kp, action: dict) -> bytes:
    from seed_agents.clients.raw import unique_ts
    from seed_agents.protocol.wire.envelope import sign_envelope

    return sign_envelope(kp, action, ts=unique_ts())


async def test_v1_replay_sends_each_stored_event_as_its_json_whether_derived_or_kept(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    _, session_id = await setup_session(c, a)
    key = f"sessions/{session_id}"
    await fill(server.app, session_id, N)
    kept = server.app.cache["replay_frames"]
    read = server.app.db.read
    assert read(events_q.holds_range, session_id, 1, N) and read(events_q.holds_range, session_id, N, N)
    assert not read(events_q.holds_range, session_id, N, N + 1) and not read(events_q.holds_range, "nope", 1, 1)
    full = expected_texts(server.app, key, session_id, 0)
    assert len(full) == N
    assert await replay_texts(server.url, a, key, 0, N) == full   # derived (and the whole runs kept)
    derived = kept.misses
    assert kept.bytes > 0 and kept.hits == 0
    assert await replay_texts(server.url, a, key, 0, N) == full   # the runs from what was kept
    assert kept.hits >= 2 * CHUNK and kept.misses - derived <= N - 2 * CHUNK
    for after_seq in (1, CHUNK - 3, CHUNK, CHUNK + 121, N - 1):   # starting inside and at a run's edge
        assert await replay_texts(server.url, a, key, after_seq, N - after_seq) == full[after_seq:], after_seq
    # then live, with no gap: the next event follows the replayed ones
    v1 = await V1.open(server.url)
    await v1.ws.send(_signed(a, {"_": "Subscribe", "key": key, "afterSeq": N - 2}))
    await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "live"}]})
    seqs, live = [], None
    async with asyncio.timeout(30):
        while len(seqs) < 3:
            text = await v1.ws.recv()
            e = json.loads(text)
            if e["_"] == "append":
                seqs.append(e["event"]["seq"])
                live = text
    assert seqs == [N - 1, N, N + 1]
    await v1.close()
    # the live event replayed: the same value, as the stored event has it
    replayed = await replay_texts(server.url, a, key, N, 1)
    assert json.loads(replayed[0]) == json.loads(live)
    assert replayed == expected_texts(server.app, key, session_id, N)[:1]
    await c.close()


async def test_v1_replay_with_nothing_kept_sends_the_same(tmp_path, storage, request):
    async with running_server(server_config(tmp_path, storage, request, replay_cache_bytes=0)) as running:
        a = keypair("A")
        c = await V2Client.open(running.url)
        _, session_id = await setup_session(c, a)
        key = f"sessions/{session_id}"
        await fill(running.app, session_id, N)
        full = expected_texts(running.app, key, session_id, 0)
        assert await replay_texts(running.url, a, key, 0, N) == full
        assert await replay_texts(running.url, a, key, 33, N - 33) == full[33:]
        kept = running.app.cache["replay_frames"]
        assert kept.bytes == 0 and kept.hits == 0
        await c.close()


async def test_v1_replay_of_pages_past_their_byte_bound_sends_the_same(tmp_path, storage, request):
    """A socket with a small outbound bound reads small replay pages (16 KiB of bodies): such a
    page is not read as one value (events_q.event_bodies_joined says None) but row by row, as
    far as its bound goes; the frames are the same, and so is what is kept."""
    async with running_server(server_config(tmp_path, storage, request, outbound_queue_bytes=64 << 10)) as running:
        a = keypair("A")
        c = await V2Client.open(running.url)
        _, session_id = await setup_session(c, a)
        key = f"sessions/{session_id}"
        await fill(running.app, session_id, N)
        full = expected_texts(running.app, key, session_id, 0)
        assert await replay_texts(running.url, a, key, 0, N) == full
        assert await replay_texts(running.url, a, key, 0, N) == full
        assert await replay_texts(running.url, a, key, 57, N - 57) == full[57:]
        await c.close()


# -- the kept frames themselves ------------------------------------------------------------------
def rows_of(session_id: str, n: int, size: int = 40) -> list[tuple[int, bytes]]:
    return [(i, codec.encode({"id": f"e{i}", "sessionId": session_id, "seq": i,
                              "event": {"type": "message", "content": "y" * size}, "createdAt": i}))
            for i in range(1, n + 1)]


def direct(framing, key: str, rows) -> bytes:
    return b"".join(ws_frame(m) for m, _seq in framing.replay(key, rows))


def replay(frames: ReplayFrames, framing, key, session_id, stamp, rows, page: int = 1000) -> bytes:
    """A whole replay as the subscription pages it (pages end on a run's edge)."""
    out, after = [], 0
    while after < len(rows):
        limit = aligned_limit(after, page)
        chunk = rows[after:after + limit]
        out += [frame for frame, _seq in frames.page(framing, key, session_id, stamp, chunk)]
        after = chunk[-1][0]
    return b"".join(out)


def test_pages_end_on_a_runs_edge():
    assert aligned_limit(0, 1000) == 1000
    assert aligned_limit(57, 1000) == 1000 - 57
    assert (57 + aligned_limit(57, 1000)) % CHUNK == 0
    assert aligned_limit(5, CHUNK // 2) == CHUNK // 2   # a page smaller than a run: as asked


def test_a_session_larger_than_the_budget_keeps_its_oldest_runs_and_never_thrashes():
    framing, sid = V1Framing(1 << 20), str(uuid.uuid4())
    key = "sessions/" + sid
    rows = rows_of(sid, 10 * CHUNK)
    run_bytes = len(direct(framing, key, rows[:CHUNK]))
    frames = ReplayFrames(budget=int(3.5 * (run_bytes + 4 * (CHUNK + 1) + 200)))
    want = direct(framing, key, rows)
    assert replay(frames, framing, key, sid, 1, rows) == want
    assert len(frames) == 3 and frames.bytes <= frames.budget
    hits = frames.hits
    assert replay(frames, framing, key, sid, 1, rows) == want
    assert frames.hits - hits == 3 * CHUNK   # the same three runs served again, none evicted
    # another session evicts the least recently replayed one, within the budget
    other = str(uuid.uuid4())
    other_rows = rows_of(other, 2 * CHUNK)
    assert replay(frames, framing, "sessions/" + other, other, 1, other_rows) == \
        direct(framing, "sessions/" + other, other_rows)
    assert frames.bytes <= frames.budget and len(frames) == 2
    # a session created again under the same id (another createdAt) starts afresh
    changed = [(seq, codec.encode({"id": "z", "sessionId": other, "seq": seq, "event": {}, "createdAt": 0}))
               for seq, _ in other_rows]
    assert replay(frames, framing, "sessions/" + other, other, 2, changed) == \
        direct(framing, "sessions/" + other, changed)


async def test_a_live_gap_is_read_and_framed_once_for_every_subscriber(server):
    """Seq 6 is published before 5 (as when two servers' notices cross): every subscriber fills
    5 from the database, the same frames for all of them (one read in that loop turn), and
    drops the late notice of 5."""
    from seed_agents.server.clock import new_id

    a = keypair("A")
    c = await V2Client.open(server.url)
    _, session_id = await setup_session(c, a)
    key = f"sessions/{session_id}"
    app = server.app

    async def write(text: str, publish: bool = True):
        payload = {"role": "user", "content": text, "meta": {"accountId": a.account_id}}
        event, body = await app.db.write(events_q.append_event, session_id, payload, new_id(), app.now_ms())
        if publish:
            app.broadcaster.publish_append(session_id, event, body)
        return event, body

    for i in range(1, 5):
        await write(str(i))
    subs = [await V1.open(server.url) for _ in range(3)]
    for v1 in subs:
        await v1.ws.send(_signed(a, {"_": "Subscribe", "key": key, "afterSeq": 2}))

    async def appends(v1, last: int) -> list[str]:
        got: list[str] = []
        async with asyncio.timeout(30):
            while not got or json.loads(got[-1])["event"]["seq"] < last:
                text = await v1.ws.recv()
                if text.startswith('{"_":"append"'):
                    got.append(text)
        return got

    for v1 in subs:
        assert [json.loads(t)["event"]["seq"] for t in await appends(v1, 4)] == [3, 4]
    frames = app.cache["replay_frames"]
    reads = frames.gap_reads
    five = await write("5", publish=False)   # committed, not yet announced
    await write("6")
    got = [await appends(v1, 6) for v1 in subs]
    assert frames.gap_reads == reads + 1   # one read for the three subscribers
    assert [[json.loads(t)["event"]["seq"] for t in g] for g in got] == [[5, 6]] * 3
    assert got[0] == got[1] == got[2]
    assert got[0][0] == expected_texts(app, key, session_id, 4)[0]   # 5 as its stored JSON
    app.broadcaster.publish_append(session_id, *five)   # the late notice of 5: dropped
    await write("7")
    for v1 in subs:
        assert [json.loads(t)["event"]["seq"] for t in await appends(v1, 7)] == [7]
        await v1.close()
    await c.close()


def test_a_page_read_joined_gives_the_frames_and_keeps_the_runs_a_row_page_does():
    """`page_joined` (the page's bodies one after the other, decoded at once) against `page`
    (row by row): the same frames, run by run with the seq each ends on, the same runs kept;
    served from kept runs when they are; None when the bodies are not the page's seqs in order."""
    framing, sid = V1Framing(1 << 20), str(uuid.uuid4())
    key = "sessions/" + sid
    rows = rows_of(sid, 3 * CHUNK + 30)
    by_rows, joined = ReplayFrames(64 << 20), ReplayFrames(64 << 20)
    after = 0
    while after < len(rows):
        chunk = rows[after:after + aligned_limit(after, 2 * CHUNK)]
        want = by_rows.page(framing, key, sid, 1, chunk)
        got = joined.page_joined(framing, key, sid, 1, chunk[0][0], len(chunk), b"".join(b for _, b in chunk))
        assert [(bytes(f), seq) for f, seq in got] == [(bytes(f), seq) for f, seq in want]
        after = chunk[-1][0]
    assert len(joined) == len(by_rows) == 3 and joined.bytes == by_rows.bytes and joined.misses == len(rows)
    whole = b"".join(bytes(f) for f, _ in by_rows.page(framing, key, sid, 1, rows))
    # again from inside a kept run: sliced from what was kept, the tail derived
    got = joined.page_joined(framing, key, sid, 1, 11, len(rows) - 10, b"".join(b for _, b in rows[10:]))
    assert b"".join(bytes(f) for f, _ in got) == whole[len(direct(framing, key, rows[:10])):]
    assert [seq for _, seq in got] == [CHUNK, 2 * CHUNK, 3 * CHUNK, len(rows)]
    assert joined.hits == 3 * CHUNK - 10
    # bodies that are not the seqs they are read as: nothing made, nothing kept
    fresh = ReplayFrames(64 << 20)
    assert fresh.page_joined(framing, key, sid, 1, 2, CHUNK, b"".join(b for _, b in rows[:CHUNK])) is None
    swapped = [rows[1], rows[0], *rows[2:CHUNK]]
    assert fresh.page_joined(framing, key, sid, 1, 1, CHUNK, b"".join(b for _, b in swapped)) is None
    assert fresh.page_joined(framing, key, sid, 1, 1, 1, codec.encode({"no": "seq"})) is None
    assert fresh.page_joined(framing, key, sid, 1, 1, 1, codec.encode([1])) is None
    assert len(fresh) == 0 and fresh.misses == 0
    assert fresh.page_joined(framing, key, sid, 1, 1, 0, b"") == []


def test_a_joined_page_with_bytes_or_a_cid_is_framed_from_its_exact_decoding():
    """The joined page is decoded by the faster decoder that reads a CID as bytes; a run that
    holds bytes is framed from the page decoded again exactly: a CID goes out as DAG-JSON's link,
    bytes as bytes, the runs before it as they were, the same frames as the row page's."""
    from multiformats import CID

    link = CID.decode("bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
    framing, sid = V1Framing(1 << 20), str(uuid.uuid4())
    key = "sessions/" + sid
    for special in ({"link": link}, {"blob": b"\x00\xff"}, {"big": -2 ** 64}):
        rows = rows_of(sid, 3 * CHUNK)
        seq, _ = rows[CHUNK + 17]   # in the second run
        rows[CHUNK + 17] = (seq, codec.encode({"id": f"e{seq}", "sessionId": sid, "seq": seq,
                                                "event": {"type": "message", **special}, "createdAt": seq}))
        want = ReplayFrames(64 << 20).page(framing, key, sid, 1, rows)
        joined = ReplayFrames(64 << 20)
        got = joined.page_joined(framing, key, sid, 1, 1, len(rows), b"".join(b for _, b in rows))
        assert [(bytes(f), s) for f, s in got] == [(bytes(f), s) for f, s in want]
        assert len(joined) == 3 and joined.misses == len(rows)
        second = bytes(got[1][0])
        assert (b'{"/":"bafyrei' in second) == ("link" in special)
        assert (b'{"/":{"bytes":"AP8"}}' in second) == ("blob" in special)

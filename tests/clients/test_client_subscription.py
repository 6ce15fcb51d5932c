"""The client's subscription buffer without a socket: flattening, exactly-once delivery, bounds."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.clients import actions, wire
from seed_agents.clients.subscription import Subscription
from seed_agents.protocol.wire import dagcbor


class _NoTransport:
    async def _unsubscribe(self, sub):
        sub._end(discard=True)


def _append(seq):
    return {"_": "append", "key": "sessions/s", "event": {"id": f"e{seq}", "seq": seq, "event": {}}}


def _batch(*seqs):
    return {"_": "append", "key": "sessions/s", "events": [_append(s)["event"] for s in seqs]}


async def _drain(sub):
    out = []
    while sub._items:
        out.append(await sub.__anext__())
    return out


async def test_batches_are_flattened_and_overlaps_dropped():
    sub = Subscription(_NoTransport(), "sessions/s", after_seq=None)
    await sub._feed({"_": "change", "key": "sessions/s", "value": {"status": "idle"}})
    await sub._feed(_batch(1, 2, 3))
    await sub._feed({"_": "replayed", "key": "sessions/s", "seq": 3})
    await sub._feed(_append(3))          # a live copy of a replayed event
    await sub._feed(_batch(2, 3, 4))     # a resumed replay that overlaps the buffer
    items = await _drain(sub)
    assert [i["_"] for i in items] == ["change", "append", "append", "append", "replayed", "append"]
    assert [i["event"]["seq"] for i in items if i["_"] == "append"] == [1, 2, 3, 4]
    assert all("events" not in i for i in items)
    assert sub.delivered_seq == 4 and sub.replayed_seq == 3


async def test_after_seq_filters_and_is_the_resume_point():
    sub = Subscription(_NoTransport(), "sessions/s", after_seq=5)
    await sub._feed(_batch(4, 5, 6))
    assert [i["event"]["seq"] for i in await _drain(sub)] == [6]
    assert sub.delivered_seq == 6


async def test_full_buffer_blocks_the_reader_until_the_caller_reads():
    sub = Subscription(_NoTransport(), "sessions/s", after_seq=None, maxsize=2)
    feeder = asyncio.create_task(sub._feed(_batch(1, 2, 3, 4)))
    async with asyncio.timeout(5):
        while len(sub._items) < 2:
            await asyncio.sleep(0)
    for _ in range(10):   # however long it is given, the feeder waits for room
        await asyncio.sleep(0)
    assert not feeder.done() and len(sub._items) == 2
    got = [(await sub.next(1))["event"]["seq"] for _ in range(4)]
    await asyncio.wait_for(feeder, 1)
    assert got == [1, 2, 3, 4]


async def test_end_with_error_delivers_buffer_first_and_close_ends_iteration():
    sub = Subscription(_NoTransport(), "sessions/s", after_seq=None)
    await sub._feed(_append(1))
    sub._end(RuntimeError("gone"))
    assert (await sub.next(1))["event"]["seq"] == 1
    with pytest.raises(RuntimeError, match="gone"):
        await sub.next(1)
    other = Subscription(_NoTransport(), "agents/a", after_seq=None)
    await other._feed({"_": "change", "key": "agents/a", "value": {}})
    await other.close()
    assert [i async for i in other] == []


def test_request_frame_is_canonical_id_then_envelope():
    frame = wire.request_frame(7, {"type": "AgentsAction"})
    # The server's fast path slices the envelope out of exactly this canonical prefix.
    assert frame.startswith(b"\xa2\x62id\x07\x68envelope")
    assert dagcbor.decode(wire.unsubscribe_frame(3, "sessions/x")) == {
        "id": 3, "_": "Unsubscribe", "key": "sessions/x"}


def test_built_actions_are_what_the_server_reads():
    """The client's builders make actions the server's own parser accepts with the values given;
    an absent optional field is left out, not sent as null."""
    from seed_agents.protocol.api.actions import parse_action

    def read(action: dict):
        return parse_action({**action, "ts": 1})

    assert read(actions.list_sessions()).agent_id is None
    assert None not in actions.list_sessions().values() and "afterSeq" not in actions.get_session("s")
    assert (read(actions.get_session("s", after_seq=0)).after_seq, read(actions.get_session("s")).after_seq) == (0, None)
    msg = read(actions.message_session("s", "hi", ["a", "b"], "m1"))
    assert (msg.session_id, msg.text, msg.context_lines, msg.client_message_id) == ("s", "hi", ("a", "b"), "m1")
    msg = read(actions.message_session("s", "hi"))
    assert (msg.text, msg.context_lines, msg.client_message_id) == ("hi", (), None)

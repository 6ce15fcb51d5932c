"""Notice encoding and the in-process bus: bounded subscriptions that fall back to a Resync."""
from __future__ import annotations

import pytest

from seed_agents.server.database.notices import (
    MAX_NOTICE_BYTES,
    LocalNoticeBus,
    Notice,
    Resync,
    decode_notice,
    encode_notice,
)


def test_a_notice_round_trips_and_big_ones_are_refused():
    notice = Notice("sessions/s1", {"kind": "partial", "text": "héllo", "seq": 3})
    assert decode_notice(encode_notice(notice)) == notice
    with pytest.raises(ValueError, match=str(MAX_NOTICE_BYTES)):
        encode_notice(Notice("sessions/s1", {"text": "x" * MAX_NOTICE_BYTES}))


async def test_every_subscription_gets_every_notice_in_order():
    bus = LocalNoticeBus()
    first, second = await bus.subscribe(), await bus.subscribe()
    sent = [Notice("sessions/s1", {"seq": i}) for i in range(1, 6)]
    for notice in sent:
        await bus.publish(notice)
    assert [await first.get() for _ in sent] == sent
    assert [await second.get() for _ in sent] == sent
    await first.close()
    await bus.publish(Notice("sessions/s1", {"seq": 6}))
    assert first.pending() == 0 and await second.get() == Notice("sessions/s1", {"seq": 6})


async def test_a_subscriber_that_falls_behind_gets_one_resync_instead_of_unbounded_memory():
    bus = LocalNoticeBus(max_pending=3)
    slow = await bus.subscribe()
    for i in range(10):
        await bus.publish(Notice("sessions/s1", {"seq": i}))
    item = await slow.get()
    assert isinstance(item, Resync) and "fell behind" in item.reason
    # After the Resync the queue holds only what came after it (here: at most max_pending).
    assert slow.pending() <= 3

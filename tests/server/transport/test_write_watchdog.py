"""server/transport/watchdog.py alone, with a stand-in transport whose buffer we set: a peer
that takes nothing for the timeout is dropped; one that keeps taking is not."""
from __future__ import annotations

import asyncio

from seed_agents.server.transport.watchdog import WriteWatchdog


class _Transport:
    def __init__(self) -> None:
        self.buffered = 0
        self.closing = False

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closing


async def _wait(cond, limit: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def _write(dog: WriteWatchdog, transport: _Transport, n: int, left: int) -> None:
    dog.count(n)
    transport.buffered = left
    dog.wrote()


async def test_a_peer_that_takes_nothing_is_dropped():
    transport, stalls = _Transport(), []
    dog = WriteWatchdog(transport, 0.05, stalls.append, watch_closing=False)
    _write(dog, transport, 1000, 1000)
    await _wait(lambda: stalls)
    assert stalls == [1000]


async def test_a_peer_that_keeps_reading_is_kept_and_a_drained_one_disarms():
    transport, stalls = _Transport(), []
    dog = WriteWatchdog(transport, 0.5, stalls.append, watch_closing=False)
    _write(dog, transport, 1000, 1000)
    loop = asyncio.get_running_loop()
    for left in (800, 600, 400, 200):   # progress well within each interval, even on a busy machine
        await asyncio.sleep(0.1)
        transport.buffered = left
    transport.buffered = 0
    await asyncio.sleep(0.6)
    assert stalls == [] and dog._handle is None
    _write(dog, transport, 10, 0)        # all of it left: nothing to watch
    assert dog._handle is None
    assert loop.is_running()


async def test_closing_is_watched_only_when_asked_and_disable_stops_it():
    for watch_closing, expected in ((True, [500]), (False, [])):
        transport, stalls = _Transport(), []
        dog = WriteWatchdog(transport, 0.05, stalls.append, watch_closing=watch_closing)
        _write(dog, transport, 500, 500)
        transport.closing = True
        await asyncio.sleep(0.15)
        assert stalls == expected
    transport, stalls = _Transport(), []
    dog = WriteWatchdog(transport, 0.05, stalls.append, watch_closing=False)
    _write(dog, transport, 500, 500)
    dog.disable()
    await asyncio.sleep(0.15)
    assert stalls == []

"""Per client address: how many connections it holds, its bucket of HTTP probes, and its
bucket of HTTP actions that failed verification.

Accounts are free to make and every connection is cheap to open, so one address could fill the
server's connection limit (`--max-connections`) or flood the GET probes from many connections
at once; these bounds are per address (`--max-connections-per-address`, `--probe-rate`). The
junk bucket (`--max-unverified` per address, as per socket) stops an address whose actions keep
failing verification (a megabyte each costs a hash) from having more bodies read at all. A
connection is counted from accept to close, through a WebSocket upgrade: `release` is called
once by whichever of the HTTP connection or the socket ends it.
"""
from __future__ import annotations

import time

from ..ratelimit import Clock, TokenBucket

# Entries of addresses with no connection are forgotten once there are this many (their probe
# buckets start full again; a bucket forgotten early only gives back a burst).
_FORGET_AT = 4096


class AddressTable:
    __slots__ = ("max_per_address", "probe_rate", "probe_burst", "junk_burst", "_open", "_probes", "_junk",
                 "clock")

    def __init__(self, max_per_address: int, probe_rate: float, probe_burst: int, junk_burst: int = 100,
                 clock: Clock = time.monotonic) -> None:
        self.max_per_address = max_per_address
        self.clock = clock
        self.probe_rate, self.probe_burst = probe_rate, probe_burst
        self.junk_burst = junk_burst   # a tenth of it refills per second
        self._open: dict[str, int] = {}
        self._probes: dict[str, TokenBucket] = {}
        self._junk: dict[str, TokenBucket] = {}

    def admit(self, address: str) -> bool:
        """Count one more connection from `address`; False (and nothing counted) past the cap."""
        count = self._open.get(address, 0)
        if count >= self.max_per_address:
            return False
        self._open[address] = count + 1
        return True

    def release(self, address: str) -> None:
        left = self._open.get(address, 1) - 1
        if left > 0:
            self._open[address] = left
        else:
            self._open.pop(address, None)

    def open_from(self, address: str) -> int:
        return self._open.get(address, 0)

    def probe(self, address: str, cost: float = 1.0) -> bool:
        """Take `cost` probe tokens of `address` (a GET that is not an action)."""
        bucket = self._probes.get(address)
        if bucket is None:
            if len(self._probes) >= _FORGET_AT:
                for known in [a for a in self._probes if a not in self._open]:
                    del self._probes[known]
            bucket = self._probes[address] = TokenBucket(self.probe_rate, self.probe_burst, self.clock)
        return bucket.take(cost)

    def junk_ready(self, address: str) -> bool:
        """May the address send another action (a look: nothing is taken)?"""
        bucket = self._junk.get(address)
        return bucket is None or bucket.ready()

    def junk(self, address: str) -> None:
        """One more action from the address that failed verification."""
        bucket = self._junk.get(address)
        if bucket is None:
            if len(self._junk) >= _FORGET_AT:
                for known in [a for a in self._junk if a not in self._open]:
                    del self._junk[known]
            bucket = self._junk[address] = TokenBucket(self.junk_burst / 10, self.junk_burst, self.clock)
        bucket.take()


def address_of(transport) -> str:
    """The peer's IP address ("" when the transport does not say, e.g. a Unix socket)."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return ""

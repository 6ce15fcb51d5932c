"""Step 6 of verification: a signature is accepted once inside its time window.

The in-memory map is authoritative while the process lives; every claim is also queued to the
accepted_signatures table (before the action's own write, and the writer commits in order, so a
write's claim is durable before its response is sent) and loaded back at start, so an envelope
accepted before a restart is still refused after it. A read may repeat on the connection that
first sent it, since Ed25519 is deterministic and a client may legitimately send the same read
twice in one millisecond.
"""
from __future__ import annotations

from protocol.errors import ProtocolError

_FROM_BEFORE = -1   # claimed by an earlier process: no connection may repeat it
_WRITE = -2         # claimed by a write: never repeats


class ReplayGuard:
    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._seen: dict[bytes, tuple[int, int]] = {}   # sig -> (owner, expires_at ms)
        self._unsaved: list[tuple[bytes, int]] = []     # claims not yet handed to the writer

    def __len__(self) -> int:
        return len(self._seen)

    def load(self, rows: list[tuple[bytes, int]]) -> None:
        for sig, expires_at in rows:
            self._seen[bytes(sig)] = (_FROM_BEFORE, expires_at)

    def claim(self, sig: bytes, *, conn_id: int, is_read: bool, ts: int, now: int) -> tuple[bool, int]:
        """Returns (newly claimed, expires_at); raises 409 on a replay."""
        entry = self._seen.get(sig)
        if entry is not None and entry[1] >= now:
            if is_read and entry[0] == conn_id:
                return False, entry[1]
            raise ProtocolError(409, "replayed envelope: this signature was already accepted; "
                                     "sign the action again (new ts) and use idempotency ids for retries")
        expires_at = max(ts, now) + self.window_ms
        self._seen[sig] = (conn_id if is_read else _WRITE, expires_at)
        self._unsaved.append((sig, expires_at))
        return True, expires_at

    def take_unsaved(self) -> list[tuple[bytes, int]]:
        """Claims to persist. Reads are flushed in batches (a wake-up of the writer thread per
        read would cost more than the read); a write flushes them all before its own job."""
        rows, self._unsaved = self._unsaved, []
        return rows

    def prune(self, now: int) -> int:
        dead = [s for s, (_, exp) in self._seen.items() if exp < now]
        for s in dead:
            del self._seen[s]
        return len(dead)

"""Step 6 of verification: a signature is accepted once inside its time window.

The in-memory map is authoritative while the process lives; every claim is also queued to the
accepted_signatures table and loaded back at start, so an envelope accepted before a restart is
still refused after it. A read may repeat on the connection that first sent it, since Ed25519 is
deterministic and a client may legitimately send the same read twice in one millisecond.

Crash safety (docs/protocol.md, "Replay"): a write's claim rides on the next job submitted to
the writer (the action's own write, or one before it; queued alone when the action writes
nothing) and the writer commits in order, so it is durable before the response is sent. Reads are
persisted in batches (every 100 ms), which a SIGKILL can cut short, so two rules cover them:
- a read signed at or before the server's start (`ts <= started_ms`) that this process has not
  accepted is refused: the dead process may have answered it, and we cannot know. Any read it
  answered with `ts` at or before its own clock is of that kind, since it died before we started;
- a read signed ahead of the server clock (`ts > now`) is the only kind that could still be fresh
  after a restart, so its claim is made durable before it is answered (`must_persist`).
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError

_FROM_BEFORE = -1   # claimed by an earlier process: no connection may repeat it
_WRITE = -2         # claimed by a write: never repeats


class ReplayGuard:
    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._seen: dict[bytes, tuple[int, int]] = {}   # sig -> (owner, expires_at ms)
        self._unsaved: list[tuple[bytes, int]] = []     # claims not yet handed to the writer
        self.started_ms: int | None = None   # reads signed at or before this are refused if unseen

    def __len__(self) -> int:
        return len(self._seen)

    def load(self, rows: list[tuple[bytes, int]], started_ms: int | None = None) -> None:
        """The claims of earlier processes, and this process's start time (server clock)."""
        self.started_ms = started_ms
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
        if is_read and self.started_ms is not None and ts <= self.started_ms:
            raise ProtocolError(409, "read signed before the server (re)started: it may have been "
                                     "answered already, so it counts as replayed; sign the action "
                                     "again (new ts)")
        expires_at = max(ts, now) + self.window_ms
        self._seen[sig] = (conn_id if is_read else _WRITE, expires_at)
        self._unsaved.append((sig, expires_at))
        return True, expires_at

    @staticmethod
    def must_persist(is_read: bool, ts: int, now: int) -> bool:
        """True when a read's claim must be durable before its answer: one signed ahead of the
        server clock would still be fresh after a quick restart (see the module docstring)."""
        return is_read and ts > now

    def forget(self, sig: bytes) -> None:
        """Undo this process's claim of `sig` (another server holds it: it stays refused there)."""
        self._seen.pop(sig, None)
        self._unsaved = [row for row in self._unsaved if row[0] != sig]

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

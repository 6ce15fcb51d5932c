"""A replay's frames in a framing that derives each event's frame from its stored bytes (v1's
JSON: decoded, then encoded as text, ~1.5 us an event, where v2 splices the stored bytes):
derived once per stored event and kept, so a desktop that subscribes again, or a second
desktop on the same session, gets them by slicing (v1 replay at v2's pace).

Kept in runs of CHUNK consecutive events (one bytes object of complete WebSocket frames and
the offset of each), and only runs that are complete: a stored event never changes (history's
`link` column aside, which no frame holds), so neither do its frames. A run belongs to the
session *as created at* `stamp` (its createdAt): a session deleted and created again under the
same id starts afresh. A replay page comes out run by run (each run's frames one bytes object,
written as it is: the page is not copied again), whatever was kept. A page whose bodies were
read as one value (`page_joined`) is decoded in one call and framed without a Python step per
event.

Bounded in bytes (`--replay-cache-bytes`; 0 keeps nothing): least recently replayed sessions
go first, and a session that alone would pass the budget keeps the runs it has (its oldest
events) instead of evicting its own, so a session larger than the budget never thrashes it.
Exported as the cache `replay_frames` (seed_agents_cache_*).

A live gap (a subscriber receiving seq 6 before 5, across servers) is filled from the database
the same way for every subscriber of the session: `gap` reads and frames it once per loop turn.
"""
from __future__ import annotations

import asyncio
import gc
from array import array
from collections import OrderedDict
from contextlib import contextmanager
from operator import itemgetter

CHUNK = 200           # events per kept run; divides the default replay page (1000 events)
SHARED_GAP = 16       # events: a live gap this short is read and framed once for every socket missing it
_RUN_OVERHEAD = 200   # bytes a kept run costs beyond its frames and offsets, about


_seq_of = itemgetter("seq")


def _are_seqs(decoded: list, first: int, count: int) -> bool:
    """Are these decoded bodies the SessionEvents `first` to `first + count - 1`, in order?"""
    try:
        return list(map(_seq_of, decoded)) == list(range(first, first + count))
    except (KeyError, TypeError):   # not SessionEvent maps
        return False


def aligned_limit(after_seq: int, page: int) -> int:
    """How many events to read after `after_seq` so the page ends on a run's boundary (when a
    page holds at least one whole run), and each run can be kept whole."""
    cut = (after_seq + page) % CHUNK
    return page - cut if page - cut > 0 else page


@contextmanager
def _no_cycle_collection():
    """Decoding a page makes ~3 dicts an event, all freed with the page: each 700 of them set
    off a collection, and what they promote sets off one of the whole heap every ~100,000 events
    (25-30 ms, 8% of a cold replay's CPU, docs/performance.md "cold"). Held off while a page is
    decoded and framed (about a millisecond: this thread makes no cycles meanwhile)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ReplayFrames:
    """session id -> [stamp, bytes, {run index -> (frames, offsets)}], least recently used first."""

    name = "replay_frames"

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0
        self._sessions: OrderedDict[str, list] = OrderedDict()
        self.hits = 0     # events served from kept runs
        self.misses = 0   # events derived
        self._gaps: dict[tuple[str, int, int], list] = {}   # this loop turn's gap fills
        self.gap_reads = 0

    def __len__(self) -> int:
        return sum(len(entry[2]) for entry in self._sessions.values())

    def _runs(self, session_id: str, stamp: object) -> dict | None:
        """The session's kept runs (None: nothing may be kept), most recently used now."""
        if stamp is None or self.budget <= 0:
            return None
        entry = self._sessions.get(session_id)
        if entry is not None and entry[0] != stamp:   # deleted and created again
            self._drop(session_id)
            entry = None
        if entry is None:
            return None
        self._sessions.move_to_end(session_id)
        return entry[2]

    def page(self, framing, key: str, session_id: str, stamp: object, rows: list) -> list[tuple[bytes, int]]:
        """The complete WebSocket frames of `rows` ((seq, stored body), seq order, a replay
        page) in `framing` (its `replay_frames`): per run, its frames one after the other and
        the seq they end on (each written as it is: no copy of the page). `stamp` None: nothing
        is kept."""
        runs = self._runs(session_id, stamp)
        out: list = []
        i, n = 0, len(rows)
        with _no_cycle_collection():
            while i < n:
                first = rows[i][0]
                index = (first - 1) // CHUNK
                lo = index * CHUNK + 1
                hi = lo + CHUNK - 1
                j = i
                while j < n and rows[j][0] <= hi:
                    j += 1
                last = rows[j - 1][0]
                kept = runs.get(index) if runs is not None else None
                if kept is not None and last - first == j - i - 1:   # consecutive: all in the run
                    frames, offsets = kept
                    out.append((memoryview(frames)[offsets[first - lo]:offsets[last - lo + 1]], last))
                    self.hits += j - i
                else:
                    frames, ends = framing.replay_frames(key, rows[i:j])
                    self.misses += j - i
                    if j - i == CHUNK and first == lo and stamp is not None:   # a whole run
                        self._keep(session_id, stamp, index, frames, ends)
                    out.append((frames, last))
                i = j
        return out

    def page_joined(self, framing, key: str, session_id: str, stamp: object, first: int, count: int,
                    joined: bytes) -> list[tuple[bytes, int]] | None:
        """`page` of the events `first` to `first + count - 1` read as their bodies one after the
        other (events_q.event_bodies_joined): decoded in one call, by the faster decoder that
        reads a CID as bytes (`framing.decode_bodies_loose`) and again exactly once a run holds
        bytes (`frames_of_loose` says None), framed run by run. None when the decoded events are
        not those seqs in that order (the caller reads the page row by row)."""
        if not count:
            return []
        runs = self._runs(session_id, stamp)
        out: list = []
        with _no_cycle_collection():
            decoded = framing.decode_bodies_loose(count, joined)
            exact = decoded is None
            if exact:
                decoded = framing.decode_bodies(count, joined)
            if not _are_seqs(decoded, first, count):
                return None
            i = 0
            while i < count:
                seq = first + i
                index = (seq - 1) // CHUNK
                lo = index * CHUNK + 1
                j = min(count, lo + CHUNK - first)   # the run's end, or the page's
                last = first + j - 1
                kept = runs.get(index) if runs is not None else None
                if kept is not None:
                    frames, offsets = kept
                    out.append((memoryview(frames)[offsets[seq - lo]:offsets[last - lo + 1]], last))
                    self.hits += j - i
                    i = j
                    continue
                made = framing.frames_of(key, decoded[i:j]) if exact else framing.frames_of_loose(key, decoded[i:j])
                if made is None:   # bytes in this run (perhaps a CID read as bytes): the page exactly, from here on
                    decoded, exact = framing.decode_bodies(count, joined), True
                    continue
                frames, ends = made
                self.misses += j - i
                if j - i == CHUNK and seq == lo and stamp is not None:   # a whole run
                    self._keep(session_id, stamp, index, frames, ends)
                out.append((frames, last))
                i = j
            del decoded   # freed here, with collection still held off
        return out

    def kept(self, session_id: str, stamp: object, after_seq: int, limit: int, max_bytes: int) -> tuple[bytes, int] | None:
        """The kept frames of the events after `after_seq`, as far as kept runs go on without a
        hole, at most `limit` events and `max_bytes` (a run's part at least): (frames, last seq),
        or None when the next event's run is not kept. The caller checks that the session
        still holds those events (it may have been deleted since)."""
        entry = self._sessions.get(session_id)
        if entry is None or entry[0] != stamp:
            return None
        runs = entry[2]
        parts: list = []
        size, seq, end = 0, after_seq, after_seq + limit
        while seq < end:
            index = seq // CHUNK   # the run of seq + 1
            run = runs.get(index)
            if run is None:
                break
            frames, offsets = run
            lo = index * CHUNK + 1
            start, stop = seq + 1 - lo, min(CHUNK, end - lo + 1)
            part = offsets[stop] - offsets[start]
            if parts and size + part > max_bytes:
                break
            parts.append(memoryview(frames)[offsets[start]:offsets[stop]])
            size += part
            seq = lo + stop - 1
        if not parts:
            return None
        self._sessions.move_to_end(session_id)
        self.hits += seq - after_seq
        return b"".join(parts), seq

    def gap(self, session_id: str, after_seq: int, upto: int, read):  # noqa: ANN001, ANN201
        """The events (`Outgoing`s) filling a live gap (after_seq, upto], read and built once in
        this loop turn for every subscriber missing the same ones: a notice overtaken by a later
        one reaches each subscriber of the session in the same turn, and each frame of an
        `Outgoing` is built once. Forgotten at the end of the turn; the caller keeps longer
        gaps (a catch-up's pages) to itself."""
        key = (session_id, after_seq, upto)
        got = self._gaps.get(key)
        if got is None:
            if not self._gaps:
                asyncio.get_running_loop().call_soon(self._gaps.clear)
            got = self._gaps[key] = read()
            self.gap_reads += 1
        return got

    def _keep(self, session_id: str, stamp: object, index: int, frames: bytes, ends: list[int]) -> None:
        offsets = array("I", [0])
        offsets.extend(ends)
        size = len(frames) + 4 * len(offsets) + _RUN_OVERHEAD
        entry = self._sessions.get(session_id)
        while self.bytes + size > self.budget:
            oldest = next(iter(self._sessions), None)
            if oldest is None or oldest == session_id:
                return   # only this session's own runs are left: keep what it has
            self._drop(oldest)
        if entry is None:
            entry = self._sessions[session_id] = [stamp, 0, {}]
        entry[2][index] = (frames, offsets)
        entry[1] += size
        self.bytes += size

    def _drop(self, session_id: str) -> None:
        entry = self._sessions.pop(session_id, None)
        if entry is not None:
            self.bytes -= entry[1]

    def forget(self, session_id: str) -> None:
        """The session is gone: its runs are of no more use."""
        self._drop(session_id)

    def clear(self) -> None:
        self._sessions.clear()
        self.bytes = 0

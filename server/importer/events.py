"""The import's hot path: a reference session's events read, checked and turned into our rows.

A task is a list of pieces (session id, agent id, after seq, up to seq); `check_task` reads each
piece from the reference database and returns what `store/imports.append_events` writes: per
piece (session id, agent id, after seq, ids, created_ats, bodies, activity).
It runs in the import process (`--jobs 1`) or in worker processes (`pool`), each with its own
read-only connection, so the checks of one batch run while the batch before is written. A
piece's rows travel as three lists (ids, times, bodies; the seq follows from the piece's start):
three objects an event through the pipe, not a tuple of five. The
checks are the same either way: seq dense from the piece's start, an id and a time, and the
payload a map in DAG-CBOR (canonical: its bytes are stored as they are; JavaScript's `undefined`
read as null and the rest re-encoded); a row that fails one is a ReferenceError naming it.
"""
from __future__ import annotations

import gc
import multiprocessing
import signal
import sqlite3

from seed_agents.protocol.wire import dagcbor

from ..store.events import activity_of
from .reference import MAX_CBOR_BYTES, ReferenceError, decode_cbor, open_read_only, row_name

# The canonical heads of a stored SessionEvent's keys, in DAG-CBOR's order (length, then bytes).
_K_ID, _K_SEQ, _K_EVENT, _K_CREATED, _K_SESSION = (dagcbor.encode(k) for k in
                                                    ("id", "seq", "event", "createdAt", "sessionId"))
_PIECE = ("SELECT id, seq, event_cbor, created_at FROM session_events WHERE session_id = ? AND seq > ? AND seq <= ?"
          " ORDER BY seq")
_db: sqlite3.Connection | None = None   # this process's reference connection (`open_reference`)


def open_reference(db_path: str, worker: bool = True) -> None:
    """A worker's start: its own read-only connection. Ctrl-C is the import process's to handle
    (it stops the workers), so a worker ignores it."""
    global _db
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gc.disable()   # it only checks events: no cycles (see command.write_events)
    _db = open_read_only(db_path)


def pool(jobs: int, db_path: str):
    """`jobs` worker processes, forked now: call it before any thread starts (the store's writer),
    so a child holds no lock another thread had."""
    return multiprocessing.get_context("fork").Pool(jobs, open_reference, (db_path,))


def check_task(task: list[tuple[str, str, int, int]], db: sqlite3.Connection | None = None) -> list[tuple]:
    """The rows of a unit's pieces, checked (`db`: the reference connection to read, else this
    worker's)."""
    db = db or _db
    assert db is not None, "open_reference first"
    out = []
    for sid, agent_id, after, upto in task:
        try:
            rows = db.execute(_PIECE, (sid, after, upto)).fetchall()
            if len(rows) < upto - after and (not rows or rows[-1][1] == after + len(rows)):
                # A gap past what was read (the piece's rows themselves are checked below).
                later = db.execute("SELECT min(seq) FROM session_events WHERE session_id = ? AND seq > ?",
                                   (sid, after + len(rows))).fetchone()[0]
                raise ReferenceError(f"{row_name('session_events', {'session_id': sid, 'seq': later})}: the seq "
                                     f"numbers of session {sid!r} jump from {after + len(rows)} to {later}")
        except sqlite3.DatabaseError as exc:
            raise ReferenceError(f"reading session_events of session {sid!r} failed: {exc}") from None
        out.append(check_piece(sid, agent_id, after, rows))
    return out


def check_piece(sid: str, agent_id: str, after: int, rows: list[tuple]) -> tuple:
    """(sid, agent_id, after, ids, created_ats, bodies, activity) of one session's reference rows
    [(id, seq, event_cbor, created_at)] past `after`, the rows seq after + 1, after + 2, ...;
    activity: (kind, message_from, message_at, at) of the piece's last event and last message
    (the session's and its agent's activity marks)."""
    ids: list[str] = []
    ats: list[int] = []
    bodies: list[bytes] = []
    add_id, add_at, add_body = ids.append, ats.append, bodies.append
    sid_head = _K_SESSION + dagcbor.encode_head(3, len(sid.encode())) + sid.encode()
    head = dagcbor.encode_head
    canonical_of = dagcbor.decode_if_canonical
    expect = after + 1
    kind = None
    message_from = message_at = created_at = None
    for event_id, seq, event_cbor, created_at in rows:
        if seq != expect:
            raise ReferenceError(f"{row_name('session_events', {'session_id': sid, 'seq': seq})}: the seq numbers "
                                 f"of session {sid!r} jump from {expect - 1} to {seq}")
        expect += 1
        if type(event_id) is not str or type(created_at) is not int or created_at < 0:
            raise ReferenceError(f"{row_name('session_events', {'session_id': sid, 'seq': seq})}: its id or "
                                 "created_at is malformed")
        payload, canonical = (canonical_of(event_cbor) if type(event_cbor) is bytes
                              and len(event_cbor) <= MAX_CBOR_BYTES else (None, False))
        if canonical:
            raw = event_cbor
        else:   # the careful path: explains a refusal, reads `undefined` as null, re-encodes
            row = {"session_id": sid, "seq": seq}
            payload = decode_cbor(event_cbor, "session_events", row, "event_cbor", undefined_as_null=True)[0]
            raw = dagcbor.encode(payload) if isinstance(payload, dict) else b""
        if type(payload) is not dict:
            raise ReferenceError(f"{row_name('session_events', {'session_id': sid, 'seq': seq})}: the event is "
                                 "not a map")
        eid = event_id.encode()
        add_id(event_id)
        add_at(created_at)
        add_body(b"".join((b"\xa5", _K_ID, head(3, len(eid)), eid, _K_SEQ, head(0, seq), _K_EVENT, raw,
                           _K_CREATED, head(0, created_at), sid_head)))
        kind, role = activity_of(payload)
        if role is not None:
            message_from, message_at = role, created_at
    return sid, agent_id, after, ids, ats, bodies, (kind, message_from, message_at, created_at)

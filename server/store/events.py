"""Session events: dense per-session seq, stored as the DAG-CBOR of the whole SessionEvent.

The body is encoded once at append time, so replay can splice stored bytes into frames
without decoding or re-encoding anything.
"""
from __future__ import annotations

from seed_agents.protocol.api import history, stored_envelope

from ..database.port import Conn, execute_later
from . import agents as agents_q
from . import codec, large_events
from .errors import NotFound

# The largest stored event (--max-event-bytes' default); past it, fields go to an attachment
# (server/store/large_events.py).
MAX_EVENT_BYTES = 2 << 20
# The largest stored event an answer carries as it is (docs/protocol.md "Pages": 4 MiB).
ANSWER_EVENT_BYTES = 4 << 20


def append_event(conn: Conn, session_id: str, payload: dict, event_id: str,
                 now: int, max_bytes: int = MAX_EVENT_BYTES, envelope: bytes | None = None,
                 envelope_action: dict | None = None) -> tuple[dict, bytes]:
    """Append to the session; returns (SessionEvent, its stored body bytes).

    The seq comes from the session row's counter, bumped in this same transaction: the
    writer's lock makes it dense and unique even with several processes on the file. The same
    transaction writes the activity rollup: the session's latest message (a message only) and
    the agent's latest activity (every event), so lists can show unread marks on their own.
    An event over `max_bytes` is stored cut, the rest kept as an attachment (large_events.spill):
    the SessionEvent returned is what was stored.

    The event's link in the session's chain (protocol/api/history.py) is written with it: the
    previous event's link is read under the same session-row lock that made the seq, so two
    servers appending to one session on PostgreSQL still build one chain (docs/architecture.md,
    "One chain per session"). `envelope`: the
    canonical bytes of the signed envelope that caused a user event, kept in its row for exports
    without what the event holds (protocol/api/stored_envelope.py); `envelope_action`, its
    action as verification decoded it from those bytes, when at hand (it makes packing cheaper).
    """
    kind, message_from = activity_of(payload)
    row = conn.execute(
        "UPDATE sessions SET last_seq = last_seq + 1, updated_at = max(updated_at, ?1),"
        " message_at = CASE WHEN CAST(?2 AS TEXT) IS NULL THEN message_at ELSE max(coalesce(message_at, 0), ?1) END,"
        " message_from = coalesce(?2, message_from)"
        " WHERE id = ?3 RETURNING last_seq, agent_id,"
        " (SELECT link FROM session_events WHERE session_id = ?3 AND seq = sessions.last_seq - 1)",
        (now, message_from, session_id)).fetchone()
    if row is None:
        raise NotFound(f"session {session_id} not found")
    seq, agent_id, prev = row
    agents_q.record_activity(conn, agent_id, session_id, kind, message_from, now)
    event = {"id": event_id, "sessionId": session_id, "seq": seq, "event": payload, "createdAt": now}
    body = codec.encode(event)
    if len(body) > max_bytes:
        body = large_events.spill(conn, session_id, event_id, event, max_bytes, now)
    if envelope is not None:   # (packed against the event as stored: a cut text stays in it)
        envelope = stored_envelope.pack(envelope, event, envelope_action)
    if prev is None and seq > 1:
        # The predecessor's link comes back with the seq (one statement, not two), read in the
        # UPDATE's snapshot. That is every commit on SQLite, whose write transaction starts
        # holding the one write lock. On PostgreSQL an append another server committed while
        # this one waited for the session's row lock is past that snapshot (READ COMMITTED),
        # so its link reads as NULL there: a statement of its own sees it. A link once written
        # never changes, so a link the snapshot does see is the one to chain to.
        prev = conn.execute("SELECT link FROM session_events WHERE session_id = ? AND seq = ?",
                            (session_id, seq - 1)).fetchone()[0]
    # An unlinked predecessor (stored before the chain, not yet backfilled) leaves this one
    # unlinked too: the backfill links both, in order.
    if prev is not None:
        prev = bytes(prev)
    link = history.link(session_id, seq, prev, body, now) if prev is not None or seq == 1 else None
    # The envelope is a column of the event's row, not a row of its own: one insert, one B-tree.
    # (Sent with the transaction's next statement where each is a round trip: execute_later.)
    execute_later(conn, "INSERT INTO session_events (session_id, seq, id, created_at, body, link, envelope)"
                  " VALUES (?, ?, ?, ?, ?, ?, ?)", (session_id, seq, event_id, now, body, link, envelope))
    return event, body


def activity_of(payload: dict) -> tuple[str, str | None]:
    """(kind, message_from) of an event payload: the kind is its `type`; message_from is the
    role of a user or assistant message, else None (other events move no message marks). A
    message the server injects (role user, `actor: "system"`: a plan reminder, a continuation)
    is nobody's message: it moves no mark either."""
    kind = payload.get("type")
    if type(kind) is not str:
        kind = "event"
    role = payload.get("role")
    if kind != "message" or role not in ("user", "assistant") or payload.get("actor") == "system":
        return kind, None
    return kind, role


def events_after(conn: Conn, session_id: str, after_seq: int, limit: int) -> list[dict]:
    """SessionEvents with seq > after_seq, ascending, at most `limit`."""
    return [codec.decode(body) for _, body in event_bodies_after(conn, session_id, after_seq, limit)]


# Rows as answers read them: a body over the bound is never read (its stand-in is answered).
_BOUNDED_ROWS = ("SELECT seq, CASE WHEN length(body) > ? THEN NULL ELSE body END, length(body), id, created_at"
                 " FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")


def _bounded_rows(conn: Conn, session_id: str, after_seq: int, limit: int, max_event: int):
    for seq, body, size, event_id, created_at in conn.execute(_BOUNDED_ROWS, (max_event, session_id, after_seq,
                                                                              limit)):
        if body is None:   # stored before events were bounded (large_events.stand_in)
            body = large_events.stand_in(session_id, seq, event_id, created_at, size, max_event)
        yield seq, body


def event_bodies_after(conn: Conn, session_id: str, after_seq: int,
                       limit: int, max_event: int = ANSWER_EVENT_BYTES) -> list[tuple[int, bytes]]:
    """[(seq, stored body)] with seq > after_seq, ascending, at most `limit` (for replay); an
    event over `max_event` bytes is answered as its stand-in."""
    return list(_bounded_rows(conn, session_id, after_seq, limit, max_event))


def event_bodies_page(conn: Conn, session_id: str, after_seq: int, limit: int,
                      max_bytes: int, max_event: int = ANSWER_EVENT_BYTES) -> tuple[list[tuple[int, bytes]], bool]:
    """Like `event_bodies_after`, but also stops once the bodies pass `max_bytes` (at least one
    row is returned, and none over `max_event`: its stand-in), so a page of big events cannot
    make the server hold gigabytes.
    Returns (rows, more): `more` is True when events past the page exist."""
    return page_of(conn, session_id, conn.execute(PAGE_ROWS, (max_event, session_id, after_seq, limit + 1)),
                   limit, max_bytes, max_event)


def page_of(conn: Conn, session_id: str, found, limit: int, max_bytes: int,
            max_event: int) -> tuple[list[tuple[int, bytes]], bool]:
    """`event_bodies_page` of the rows PAGE_ROWS found (read by the caller, e.g. with others)."""
    rows: list[tuple[int, bytes]] = []
    size = 0
    for seq, body in found:
        if body is None:   # stored before events were bounded (large_events.stand_in)
            body = _stand_in_at(conn, session_id, seq, max_event)
        if len(rows) == limit or (rows and size + len(body) > max_bytes):
            return rows, True
        rows.append((seq, body))
        size += len(body)
    return rows, False


# A replay page reads the seq and the body alone (no id, time or length made into Python objects
# for every row: 0.55 of the read's CPU, docs/performance.md "v1 replay"); the rare event over the
# bound has its stand-in's fields read by one more lookup.
PAGE_ROWS = ("SELECT seq, CASE WHEN length(body) > ? THEN NULL ELSE body END"
              " FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?")


# A page's bodies as one value, for a replay that decodes them all (v1's): one row and one bytes
# object a page instead of a tuple, an int and a bytes a row (0.6 of the page read's CPU,
# docs/performance.md "cold"). SQLite concatenates in the order its rows come (the ordered
# subquery's; an aggregate's own ORDER BY costs a sort), PostgreSQL as its ORDER BY says: the
# caller checks the order anyway (each decoded event names its seq).
_JOINED_SQLITE = ("SELECT count(*), min(seq), max(seq), sum(length(body)), max(length(body)),"
                  " CAST(group_concat(body, '') AS BLOB)"
                  " FROM (SELECT seq, body FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?)")
_JOINED_POSTGRES = ("SELECT count(*), min(seq), max(seq), sum(length(body)), max(length(body)),"
                    " string_agg(body, ''::bytea ORDER BY seq)"
                    " FROM (SELECT seq, body FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?) p")


def event_bodies_joined(conn: Conn, session_id: str, after_seq: int, limit: int, max_bytes: int,
                        max_event: int = ANSWER_EVENT_BYTES) -> tuple[int, int, bytes, bool] | None:
    """The page `event_bodies_page` would read, as (first seq, count, the bodies one after the
    other, more): the events `first` to `first + count - 1`, consecutive. None when the page is
    not that plain (a body over `max_event`, bodies past `max_bytes`, a seq missing): the caller
    reads it with `event_bodies_page`. `more` says events past the page may exist (a full page)."""
    sql = _JOINED_POSTGRES if conn.traits.name == "postgresql" else _JOINED_SQLITE
    count, first, last, size, largest, joined = conn.execute(sql, (session_id, after_seq, limit)).fetchone()
    if not count:
        return after_seq + 1, 0, b"", False
    if largest > max_event or (count > 1 and size > max_bytes) or last - first + 1 != count:
        return None
    return first, count, bytes(joined), count == limit


def _stand_in_at(conn: Conn, session_id: str, seq: int, max_event: int) -> bytes:
    event_id, created_at, size = conn.execute(
        "SELECT id, created_at, length(body) FROM session_events WHERE session_id = ? AND seq = ?",
        (session_id, seq)).fetchone()
    return large_events.stand_in(session_id, seq, event_id, created_at, size, max_event)


def holds_range(conn: Conn, session_id: str, first: int, last: int) -> bool:
    """Does the session still hold its events `first` to `last`? (A replay's kept frames are
    sent only then: server/live/replay_frames.py.) Events leave only with their whole session
    and seqs are dense, so the two ends say it, with two index lookups."""
    return conn.execute("SELECT count(*) FROM session_events WHERE session_id = ? AND seq IN (?, ?)",
                        (session_id, first, last)).fetchone()[0] == (1 if first == last else 2)


SEQ_ROW = "SELECT seq FROM session_events WHERE id = ?"


def event_seq(conn: Conn, event_id: str) -> int | None:
    row = conn.execute(SEQ_ROW, (event_id,)).fetchone()
    return None if row is None else row[0]


def last_seq(conn: Conn, session_id: str) -> int:
    """The session's highest seq (0 when it has no events or does not exist)."""
    row = conn.execute("SELECT last_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return 0 if row is None else row[0]

"""The sessions' hash chains in the store: links as written at append (server/store/events.py),
the backfill of events stored before the chain existed, and the reads a head and an export need.
The block and link rules are protocol/api/history.py's."""
from __future__ import annotations

from seed_agents.protocol.api import history, stored_envelope

from ..database.port import Conn
from . import codec

# Links and envelopes of one page: an envelope is at most one frame (1 MiB), so a page is
# bounded in bytes as GetSession's is.
MAX_LINKS = 10_000


def head_at(conn: Conn, session_id: str, seq: int | None = None) -> tuple[int, bytes | None]:
    """(seq, link) of the session's event at `seq` (default: its last); link None when the
    session has no events or that event is not linked yet."""
    if seq is None:
        row = conn.execute("SELECT last_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
        seq = 0 if row is None else row[0]
    if seq == 0:
        return 0, None
    row = conn.execute("SELECT link FROM session_events WHERE session_id = ? AND seq = ?",
                       (session_id, seq)).fetchone()
    return seq, None if row is None or row[0] is None else bytes(row[0])


def chain_page(conn: Conn, session_id: str, after_seq: int, limit: int,
               max_bytes: int) -> tuple[list[tuple[int, bytes | None, bytes | None]], bool]:
    """[(seq, link, envelope or None)] after `after_seq`, ascending, at most `limit` rows and
    about `max_bytes` (at least one row); and whether more follow."""
    rows = conn.execute(
        "SELECT seq, link, envelope, CASE WHEN envelope IS NULL THEN NULL ELSE body END"
        " FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after_seq, limit + 1)).fetchall()
    out: list[tuple[int, bytes | None, bytes | None]] = []
    size = 0
    for seq, link, envelope, body in rows:
        if envelope is not None:   # rebuilt from what its event holds (protocol/api/stored_envelope.py)
            envelope = bytes(envelope)
            if stored_envelope.is_packed(envelope):
                envelope = stored_envelope.unpack(envelope, _stored_event(body))
        weight = 48 + (len(envelope) if envelope is not None else 0)
        if len(out) == limit or (out and size + weight > max_bytes):
            return out, True
        out.append((seq, None if link is None else bytes(link), envelope))
        size += weight
    return out, False


def _stored_event(body: bytes) -> object:
    try:
        return codec.decode(bytes(body))
    except Exception:  # noqa: BLE001 - an edited store's body: the envelope comes back as kept
        return None


def backfill(conn: Conn, limit: int) -> int:
    """Link up to `limit` events stored before the chain, oldest first within each session;
    returns how many were linked (0: none is left). Each call is one transaction and leaves
    every chain a prefix of the right one, so an interrupted backfill resumes where it stopped;
    two servers backfilling one database write the same links."""
    done = 0
    starts = conn.execute("SELECT session_id, min(seq) FROM session_events WHERE link IS NULL"
                          " GROUP BY session_id LIMIT 100").fetchall()
    for session_id, first in starts:
        if done >= limit:
            break
        _, prev = head_at(conn, session_id, first - 1) if first > 1 else (0, None)
        if first > 1 and prev is None:
            continue   # the predecessor is missing: nothing can be linked after a gap
        rows = conn.execute("SELECT seq, created_at, body FROM session_events WHERE session_id = ? AND seq >= ?"
                            " ORDER BY seq LIMIT ?", (session_id, first, limit - done)).fetchall()
        for seq, created_at, body in rows:
            prev = history.link(session_id, seq, prev, bytes(body), created_at)
            conn.execute("UPDATE session_events SET link = ? WHERE session_id = ? AND seq = ?",
                         (prev, session_id, seq))
            done += 1
    return done

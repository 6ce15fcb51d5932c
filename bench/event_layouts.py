"""Layouts of the event table against each other, in one run: `python -m bench.event_layouts`.

Each layout's table gets the same rows appended as a live server appends them (`--fill` more
sessions taking turns with the measured one, two events a turn, the user event carrying a
337-byte envelope, a commit every 8 turns), then the measured session is read cold (a new
connection: SQLite's cache empty, the OS's warm, as at a server's first replay) through the
replay's joined page (server/store/events.py). Reported per layout, against main's: the
appends' CPU and pages written per turn (SQLite's own count), the cold read's CPU.
Plain apsw on temporary files, no server: the storage's part alone (docs/performance.md, "The
cold replay in each layout"). Layouts:

- `wr`: main's, a WITHOUT ROWID table keyed (session_id, seq), the envelope in its row
- `wr-noenv`: the same without the envelope (the storage of a tree with no chain work)
- `rowid`: a rowid table, (session_id, seq) its unique index (branch `chain6-rowid`)
- `keyed`: a rowid table keyed (session number << 32 | seq): a session's rows neighbours, the
  interior cells integers; (session_id, seq) its unique index
- `wr-envtab`: `wr` with the envelope in an append-only table of its own, the row naming its id
- `wr-overflow`: `wr` with the user event's row padded past what a 4 KiB page keeps in a cell
  (1,002 bytes), to see whether spilling the envelope to an overflow page helps
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import apsw

COLS = ("session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,"
        " body BLOB NOT NULL, link BLOB, envelope BLOB")
DDL = {
    "wr": f"CREATE TABLE session_events ({COLS}, PRIMARY KEY (session_id, seq)) STRICT, WITHOUT ROWID",
    "wr-noenv": f"CREATE TABLE session_events ({COLS}, PRIMARY KEY (session_id, seq)) STRICT, WITHOUT ROWID",
    "rowid": f"CREATE TABLE session_events ({COLS}, PRIMARY KEY (session_id, seq)) STRICT",
    "keyed": f"CREATE TABLE session_events (k INTEGER PRIMARY KEY, {COLS}, UNIQUE (session_id, seq)) STRICT",
    "wr-envtab": (f"CREATE TABLE session_events ({COLS}, envelope_id INTEGER, PRIMARY KEY (session_id, seq))"
                  " STRICT, WITHOUT ROWID; CREATE TABLE event_envelopes (id INTEGER PRIMARY KEY, body BLOB NOT NULL) STRICT"),
    "wr-overflow": f"CREATE TABLE session_events ({COLS}, PRIMARY KEY (session_id, seq)) STRICT, WITHOUT ROWID",
}
PAGE = ("SELECT count(*), min(seq), max(seq), sum(length(body)), max(length(body)), CAST(group_concat(body, '') AS BLOB)"
        " FROM (SELECT seq, body FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?)")
BODY, LINK, ENVELOPE = os.urandom(430), os.urandom(36), os.urandom(337)   # a bench event's sizes
COMMIT_TURNS = 8


def appender(kind: str, conn: apsw.Connection):
    """(sql, row(session number, session id, seq)) of one append in this layout."""
    def plain(envelope_of):
        return ("INSERT INTO session_events VALUES (?, ?, ?, ?, ?, ?, ?)",
                lambda i, s, q: (s, q, f"{s}-{q}", q, BODY, LINK, envelope_of(q)))
    if kind == "keyed":
        return ("INSERT INTO session_events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                lambda i, s, q: ((i << 32) | q, s, q, f"{s}-{q}", q, BODY, LINK, ENVELOPE if q % 2 else None))
    if kind == "wr-envtab":
        def row(i, s, q):
            envelope_id = None
            if q % 2:
                conn.execute("INSERT INTO event_envelopes (body) VALUES (?)", (ENVELOPE,))
                envelope_id = conn.last_insert_rowid()
            return (s, q, f"{s}-{q}", q, BODY, LINK, None, envelope_id)
        return "INSERT INTO session_events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row
    if kind == "wr-noenv":
        return plain(lambda q: None)
    if kind == "wr-overflow":
        padded = ENVELOPE + bytes(1100 - len(ENVELOPE))
        return plain(lambda q: padded if q % 2 else None)
    return plain(lambda q: ENVELOPE if q % 2 else None)


def build(kind: str, path: str, sessions: list[str], events: int) -> tuple[float, int]:
    """Append the rows; (CPU seconds, pages written)."""
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")   # pages are counted, not waited for
    conn.execute(DDL[kind])
    sql, row = appender(kind, conn)
    written = conn.status(apsw.SQLITE_DBSTATUS_CACHE_WRITE)[0]
    cpu = time.process_time()
    for turn in range(events // 2):
        if turn % COMMIT_TURNS == 0:
            conn.execute("BEGIN")
        for i, sid in enumerate(sessions):
            conn.execute(sql, row(i, sid, 2 * turn + 1))
            conn.execute(sql, row(i, sid, 2 * turn + 2))
        if turn % COMMIT_TURNS == COMMIT_TURNS - 1:
            conn.execute("COMMIT")
    if conn.in_transaction:
        conn.execute("COMMIT")
    cpu = time.process_time() - cpu
    written = conn.status(apsw.SQLITE_DBSTATUS_CACHE_WRITE)[0] - written
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return cpu, written


def cold_read(path: str, session: str, events: int) -> float:
    """CPU seconds of reading the session from a new connection, page by page."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        cpu, after, seen = time.process_time(), 0, 0
        while seen < events:
            count, _first, last, *_ = conn.execute(PAGE, (session, after, 1000)).fetchall()[0]
            if not count:
                break
            after, seen = last, seen + count
        cpu = time.process_time() - cpu
    finally:
        conn.close()
    assert seen == events, (path, seen)
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.event_layouts", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000, help="events of each session")
    parser.add_argument("--fill", type=int, default=3, help="sessions taking turns with the measured one")
    parser.add_argument("--rounds", type=int, default=7, help="cold reads of each layout (median)")
    parser.add_argument("--layouts", nargs="+", default=list(DDL), choices=list(DDL))
    args = parser.parse_args(argv)
    sessions = [f"{os.urandom(4).hex()}-{i}" for i in range(args.fill + 1)]
    load = os.getloadavg()
    base = tempfile.mkdtemp(prefix="bench-layouts-")
    try:
        paths = {k: os.path.join(base, f"{k}.sqlite") for k in args.layouts}
        built = {k: build(k, p, sessions, args.events) for k, p in paths.items()}
        reads: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.rounds):
            for k, p in paths.items():
                reads[k].append(cold_read(p, sessions[0], args.events))
        sizes = {k: os.path.getsize(p) for k, p in paths.items()}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    first = args.layouts[0]
    turns = (args.events // 2) * len(sessions)
    print(f"{args.events:,} events in each of {len(sessions)} sessions taking turns; a commit every "
          f"{COMMIT_TURNS} turns of each; ratios against {first}\n")
    print("| layout | append CPU per turn | pages written per turn | cold read CPU | file |")
    print("|---|---|---|---|---|")
    read0 = statistics.median(reads[first])
    for k in paths:
        cpu, pages = built[k]
        read = statistics.median(reads[k])
        print(f"| {k} | {cpu / turns * 1e6:.1f} us ({cpu / built[first][0]:.3f}) | {pages / turns:.2f}"
              f" ({pages / built[first][1]:.3f}) | {read * 1000:.1f} ms ({read / read0:.3f}) | {sizes[k] >> 20} MiB |")
    print(f"\nload average at start {load}, at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

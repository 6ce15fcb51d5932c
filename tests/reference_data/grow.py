"""A larger reference data directory made from the fixture (tests/reference_data/fixture/): the
reference's own sessions copied under new ids, with their events' bytes as the reference wrote
them, until the database holds the events asked for. For the kill-and-resume test and
bench/import_rate.py, which need more events than a fixture small enough to keep in git."""
from __future__ import annotations

import shutil
import sqlite3
import uuid
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixture"


def copy_fixture(dst: Path) -> Path:
    """The fixture copied to `dst` (a test reads a copy: the original stays as git has it)."""
    shutil.copytree(FIXTURE, dst)
    return dst


def grow(dst: Path, events: int) -> int:
    """Copy the fixture to `dst` and add copies of its top-level sessions until it holds at least
    `events` events; returns how many it holds."""
    copy_fixture(dst)
    db = sqlite3.connect(dst / "agents.sqlite")
    try:
        sessions = db.execute("SELECT id FROM sessions WHERE parent_session_id IS NULL ORDER BY id").fetchall()
        total = db.execute("SELECT count(*) FROM session_events").fetchone()[0]
        n = 0
        with db:
            while total < events:
                source = sessions[n % len(sessions)][0]
                n += 1
                new = str(uuid.UUID(int=n, version=4))
                db.execute("INSERT INTO sessions (id, account_id, agent_id, title, title_source, status,"
                           " parent_session_id, run_id, plan_cbor, model_override_cbor, description, created_at,"
                           " updated_at) SELECT ?, account_id, agent_id, title || ' #' || ?, title_source, status,"
                           " NULL, NULL, plan_cbor, model_override_cbor, description, created_at + ?, updated_at + ?"
                           " FROM sessions WHERE id = ?", (new, n, n, n, source))
                rows = db.execute("SELECT seq, event_cbor, created_at FROM session_events WHERE session_id = ?"
                                  " ORDER BY seq", (source,)).fetchall()
                db.executemany("INSERT INTO session_events (id, session_id, seq, event_cbor, created_at)"
                               " VALUES (?, ?, ?, ?, ?)",
                               [(str(uuid.uuid4()), new, seq, body, at + n) for seq, body, at in rows])
                total += len(rows)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return total
    finally:
        db.close()

"""Idempotency records: the first response to (account, action, client id).

Exactly-once relies on the caller running get, effect and put inside one write job: the writer
thread runs jobs one at a time, so a second request with the same id sees the first's record.
"""
from __future__ import annotations

from ..database.port import Conn, execute_later


def idem_get(conn: Conn, account_id: str, action: str,
             client_id: str) -> tuple[bytes, bytes] | None:
    """(fingerprint, response bytes) recorded for this id, or None."""
    row = conn.execute(IDEM_ROW, (account_id, action, client_id)).fetchone()
    return None if row is None else (row[0], row[1])


def idem_put(conn: Conn, account_id: str, action: str, client_id: str,
             fingerprint: bytes, response_bytes: bytes, now: int) -> None:
    """Record the first response; a second put for one id is a bug and raises ConstraintError."""
    execute_later(conn, IDEM_PUT, (account_id, action, client_id, bytes(fingerprint), bytes(response_bytes), now))


# The same two statements, for a job that sends them with others in one round trip.
IDEM_ROW = ("SELECT fingerprint, response FROM idempotency"
            " WHERE account_id = ? AND action = ? AND client_id = ?")
IDEM_PUT = ("INSERT INTO idempotency (account_id, action, client_id, fingerprint, response, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)")

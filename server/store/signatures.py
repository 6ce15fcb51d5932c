"""Accepted envelope signatures, so a replay is refused even after a restart (step 6).

A row is live while `expires_at >= now` (the same rule as seed_agents.server.verification.replay_guard).
"""
from __future__ import annotations

from ..database.port import Conn


def claim_signature(conn: Conn, sig: bytes, expires_at: int, now: int) -> bool:
    """True if newly claimed; False if a live claim exists. An expired claim is taken over."""
    conn.execute(
        "INSERT INTO accepted_signatures (sig, expires_at) VALUES (?, ?)"
        " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
        " WHERE accepted_signatures.expires_at < ?",
        (bytes(sig), expires_at, now))
    return conn.changes() > 0


def claim_signatures(conn: Conn, rows: list[tuple[bytes, int]], now: int) -> None:
    """Persist a batch of (sig, expires_at) claims the in-memory guard already made."""
    for sig, expires_at in rows:
        claim_signature(conn, sig, expires_at, now)


def prune_signatures(conn: Conn, now: int) -> int:
    """Delete expired claims; returns how many."""
    conn.execute("DELETE FROM accepted_signatures WHERE expires_at < ?", (now,))
    return conn.changes()


def unexpired_signatures(conn: Conn, now: int) -> list[tuple[bytes, int]]:
    """[(sig, expires_at)] still live at `now`, to reload the in-memory guard at start."""
    return conn.execute("SELECT sig, expires_at FROM accepted_signatures WHERE expires_at >= ?",
                        (now,)).fetchall()

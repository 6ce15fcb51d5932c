"""Accepted envelope signatures, so a replay is refused even after a restart (step 6).

A claim is live while `expires_at >= now` (the same rule as seed_agents.server.verification.replay_guard).
Two tables hold them: `accepted_signatures`, a row per signature keyed by it (`claim_signature`:
the claim servers sharing one store race on), and `accepted_signature_sets`, one appended row per
batch of claims the in-memory guard already made (`claim_signatures`: one server owns the store,
so nothing is raced and a commit writes one page for the batch where a row per random key dirtied
a page each).
"""
from __future__ import annotations

import struct

from ..database.port import Conn

_ENTRY = struct.Struct(">64sq")   # a set's entry: the signature, its expiry (ms)


def claim_signature(conn: Conn, sig: bytes, expires_at: int, now: int) -> bool:
    """True if newly claimed; False if a live claim exists. An expired claim is taken over."""
    conn.execute(
        "INSERT INTO accepted_signatures (sig, expires_at) VALUES (?, ?)"
        " ON CONFLICT (sig) DO UPDATE SET expires_at = excluded.expires_at"
        " WHERE accepted_signatures.expires_at < ?",
        (bytes(sig), expires_at, now))
    return conn.changes() > 0


def claim_signatures(conn: Conn, rows: list[tuple[bytes, int]], now: int) -> None:
    """Persist a batch of (sig, expires_at) claims the in-memory guard already made (and so
    decided: nothing here refuses one), as one row. `now` is unused: every claim is kept."""
    if not rows:
        return
    if any(len(sig) != 64 for sig, _ in rows):   # (an envelope's is: protocol.wire.envelope)
        raise ValueError("a signature to claim is not 64 bytes")
    conn.execute("INSERT INTO accepted_signature_sets (expires_at, sigs) VALUES (?, ?)",
                 (max(expires_at for _, expires_at in rows),
                  b"".join(_ENTRY.pack(bytes(sig), expires_at) for sig, expires_at in rows)))


def merged_claims(calls: list[tuple[list[tuple[bytes, int]], int]]) -> tuple[list[tuple[bytes, int]], int]:
    """The args of one `claim_signatures` for several calls' (rows, now): the writer runs the
    claims riding on one batch's jobs as one (workers.write_nowait's `merge`), one row."""
    return [row for rows, _now in calls for row in rows], max(now for _rows, now in calls)


def prune_signatures(conn: Conn, now: int) -> int:
    """Delete expired claims (a set once all of its have expired); returns how many rows."""
    conn.execute("DELETE FROM accepted_signatures WHERE expires_at < ?", (now,))
    pruned = conn.changes()
    conn.execute("DELETE FROM accepted_signature_sets WHERE expires_at < ?", (now,))
    return pruned + conn.changes()


def unexpired_signatures(conn: Conn, now: int) -> list[tuple[bytes, int]]:
    """[(sig, expires_at)] still live at `now`, to reload the in-memory guard at start."""
    live = conn.execute("SELECT sig, expires_at FROM accepted_signatures WHERE expires_at >= ?",
                        (now,)).fetchall()
    for (sigs,) in conn.execute("SELECT sigs FROM accepted_signature_sets WHERE expires_at >= ?", (now,)):
        live.extend((sig, expires_at) for sig, expires_at in _ENTRY.iter_unpack(bytes(sigs))
                    if expires_at >= now)
    return live

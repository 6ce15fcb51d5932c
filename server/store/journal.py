"""The run journal: what a run recorded (its calls and results, its waits and how they ended).

Append-only, seq dense per run. The storage design's caps hold: at most 5,000 entries or 8 MiB
per run; the append that would cross one is refused (`JournalFull`) and the run fails with
`journal-cap`. The caps are checked against two counters on the run's row, moved by the same
conditional UPDATE that hands out the seq, so concurrent appenders (another server waking the
run) still get distinct seqs and never cross a cap together.

RunJournalEntryInfo = {runId, seq, entry, createdAt} (the reference's shape).
"""
from __future__ import annotations

from . import codec

MAX_ENTRIES = 5_000
MAX_BYTES = 8 * 1024 * 1024


class JournalFull(Exception):
    """The run's journal is at a cap: nothing was written."""


def append(conn, run_id: str, entry: dict, now: int) -> dict:
    """Append `entry` (a map with `kind`) to the run's journal; its RunJournalEntryInfo."""
    body = codec.encode(entry)
    row = conn.execute(
        "UPDATE runs SET journal_entries = journal_entries + 1, journal_bytes = journal_bytes + ?"
        " WHERE id = ? AND journal_entries < ? AND journal_bytes + ? <= ? RETURNING journal_entries",
        (len(body), run_id, MAX_ENTRIES, len(body), MAX_BYTES)).fetchone()
    if row is None:
        raise JournalFull(f"run {run_id}'s journal is full (at most {MAX_ENTRIES} entries or "
                          f"{MAX_BYTES // (1024 * 1024)} MiB)")
    seq = row[0]
    conn.execute("INSERT INTO run_journal (run_id, seq, entry, created_at) VALUES (?, ?, ?, ?)",
                 (run_id, seq, body, now))
    return {"runId": run_id, "seq": seq, "entry": entry, "createdAt": now}


def entries(conn, run_id: str, after_seq: int, limit: int) -> list[dict]:
    """The run's entries with seq > after_seq, ascending, at most `limit`."""
    rows = conn.execute("SELECT seq, entry, created_at FROM run_journal WHERE run_id = ? AND seq > ?"
                        " ORDER BY seq LIMIT ?", (run_id, after_seq, limit)).fetchall()
    return [{"runId": run_id, "seq": seq, "entry": codec.decode(body), "createdAt": created}
            for seq, body, created in rows]


def entry(conn, run_id: str, seq: int) -> dict | None:
    rows = entries(conn, run_id, seq - 1, 1)
    return rows[0] if rows and rows[0]["seq"] == seq else None


def tree_entries(conn, root_run_id: str, limit: int) -> list[dict]:
    """The latest `limit` entries of a run tree, run by run (oldest run first), each run's in
    seq order (a subscription's replay)."""
    rows = conn.execute(
        "SELECT j.run_id, j.seq, j.entry, j.created_at FROM run_journal j JOIN runs r ON r.id = j.run_id"
        " WHERE r.root_run_id = ? ORDER BY r.created_at DESC, r.id DESC, j.seq DESC LIMIT ?",
        (root_run_id, limit)).fetchall()[::-1]
    return [{"runId": run_id, "seq": seq, "entry": codec.decode(body), "createdAt": created}
            for run_id, seq, body, created in rows]


def record_tool_events(conn, run_id: str, appended: list[tuple[dict, bytes]], now: int) -> list[dict]:
    """Journal a model run's tool calls and results as they are appended to its session: one
    small entry each, pointing at its session event (`seq`), so the journal says what the run did
    without copying inputs and outputs (the events hold them). A delegate call is journaled with
    its child when the turn parks (server/runtime/parked.py), so it is left out here."""
    out = []
    for event, _body in appended:
        payload = event["event"]
        kind = payload.get("type")
        if kind == "tool_call" and payload.get("name") != "delegate":
            entry = {"kind": "call", "tool": payload.get("name"), "toolCallId": payload.get("id"),
                     "eventSeq": event["seq"]}
        elif kind == "tool_result":
            entry = {"kind": "result", "tool": payload.get("name"), "toolCallId": payload.get("toolCallId"),
                     "ok": "error" not in payload, "eventSeq": event["seq"]}
        else:
            continue
        out.append(append(conn, run_id, entry, now))
    return out

"""The writes of `seed-agents import` (server/importer/): rows a reference server kept, inserted
as they are, keyed by their own ids.

Every insert is `ON CONFLICT DO NOTHING`: a row already here (an earlier run of the import, or
another server importing the same data at once into one PostgreSQL database) is left as it is
and counted as such, so importing twice gives the same store. Events are the exception that
needs order: `append_events` takes the session row's lock, inserts only past its `last_seq`,
and moves `last_seq` in the same transaction, so a resumed or concurrent import continues the
seq run instead of repeating or skipping a seq.
"""
from __future__ import annotations

from itertools import chain, repeat

from ..database.port import Conn
from . import agents as agents_q


def _insert(conn: Conn, sql: str, params: tuple) -> bool:
    """True when the row was new."""
    conn.execute(sql + " ON CONFLICT DO NOTHING", params)
    return conn.changes() > 0


def account(conn: Conn, account_id: str, created_at: int) -> bool:
    return _insert(conn, "INSERT INTO accounts (id, created_at) VALUES (?, ?)", (account_id, created_at))


def signer(conn: Conn, account_id: str, signer_id: str, role: str, capability: bytes | None, created_at: int) -> bool:
    return _insert(conn, "INSERT INTO account_signers (account_id, signer_id, role, capability_cid, capability,"
                         " created_at) VALUES (?, ?, ?, NULL, ?, ?)",
                   (account_id, signer_id, role, capability, created_at))


def provider(conn: Conn, account_id: str, name: str, config: bytes, provider_id: str, created_at: int,
             updated_at: int) -> bool:
    if conn.execute("SELECT 1 FROM model_providers WHERE id = ?", (provider_id,)).fetchone():
        return False
    return _insert(conn, "INSERT INTO model_providers (account_id, name, config, created_at, updated_at, id)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (account_id, name, config, created_at, updated_at, provider_id))


def secret(conn: Conn, account_id: str, name: str, sealed: bytes, metadata: bytes | None, secret_id: str,
           created_at: int, updated_at: int) -> bool:
    if conn.execute("SELECT 1 FROM secrets WHERE id = ?", (secret_id,)).fetchone():
        return False
    return _insert(conn, "INSERT INTO secrets (account_id, name, ciphertext, metadata, created_at, updated_at, id)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (account_id, name, sealed, metadata, created_at, updated_at, secret_id))


def identity(conn: Conn, account_id: str, name: str, row_id: str, identity_id: str, sealed_seed: bytes,
             label: str | None, server_url: str | None, created_at: int, updated_at: int) -> bool:
    if conn.execute("SELECT 1 FROM signing_identities WHERE id = ?", (row_id,)).fetchone():
        return False
    return _insert(conn, "INSERT INTO signing_identities (account_id, name, id, identity_id, sealed_seed, label,"
                         " icon, server_url, origin, created_at, updated_at)"
                         " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, 'imported', ?, ?)",
                   (account_id, name, row_id, identity_id, sealed_seed, label, server_url, created_at, updated_at))


def agent(conn: Conn, agent_id: str, account_id: str, definition: bytes, state_dir: str, status: str,
          public_read: bool, created_at: int, updated_at: int) -> bool:
    return _insert(conn, "INSERT INTO agents (id, account_id, definition, state_dir, status, public_read,"
                         " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (agent_id, account_id, definition, state_dir, status, int(public_read), created_at, updated_at))


def collaborator(conn: Conn, agent_id: str, account_id: str, role: str, status: str, accepted_at: int | None,
                 created_at: int, updated_at: int) -> bool:
    return _insert(conn, "INSERT INTO agent_collaborators (agent_id, account_id, role, status, accepted_at,"
                         " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (agent_id, account_id, role, status, accepted_at, created_at, updated_at))


def trigger(conn: Conn, row: tuple) -> bool:
    """(id, account_id, agent_id, name, enabled, source_type, source_cbor, prompt_cbor,
    continuation_cbor, created_at, updated_at, last_checked_at, last_fired_at, last_error, next_due_at)."""
    if conn.execute("SELECT 1 FROM agent_triggers WHERE agent_id = ? AND name = ? AND id <> ?",
                    (row[2], row[3], row[0])).fetchone():
        return False
    return _insert(conn, "INSERT INTO agent_triggers (id, account_id, agent_id, name, enabled, source_type,"
                         " source_cbor, prompt_cbor, continuation_cbor, created_at, updated_at, last_checked_at,"
                         " last_fired_at, last_error, next_due_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   row)


def tool_document(conn: Conn, account_id: str, agent_id: str, name: str, kind: str, cid: str, doc: bytes,
                  enabled: bool, created_at: int, updated_at: int) -> bool:
    return _insert(conn, "INSERT INTO tool_documents (account_id, agent_id, name, kind, cid, doc, enabled,"
                         " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (account_id, agent_id, name, kind, cid, doc, int(enabled), created_at, updated_at))


def sessions(conn: Conn, rows: list[tuple]) -> list[bool]:
    """Sessions [(id, account_id, agent_id, title, title_source, status, parent_session_id, run_id,
    plan, model_override, description, created_at, updated_at)] in one statement (not a round trip
    each), their events to come (last_seq 0); True per row that was new."""
    present = set(sessions_present(conn, [r[0] for r in rows]))
    fresh = [r for r in rows if r[0] not in present]
    conn.executemany("INSERT INTO sessions (id, account_id, agent_id, title, title_source, status,"
                     " parent_session_id, run_id, plan, model_override, description, created_at, updated_at,"
                     " last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT DO NOTHING", fresh)
    return [r[0] not in present for r in rows]


def sessions_present(conn: Conn, ids: list[str]) -> dict[str, int]:
    """{session id: last_seq} of those of `ids` that are here."""
    found: dict[str, int] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        marks = ", ".join("?" * len(part))
        for sid, seq in conn.execute(f"SELECT id, last_seq FROM sessions WHERE id IN ({marks})", tuple(part)):
            found[sid] = seq
    return found


def bulk_settings(conn: Conn) -> None:
    """The import's writer connection (only it, only while the import runs): SQLite keeps the
    pages the import touches in memory (random ids in the events' id index otherwise read back
    page by page), and checkpoints its WAL into the file every 80 MiB instead of every 4. Neither
    changes what a commit promises: each unit still commits whole and durably."""
    if conn.traits.name == "sqlite":
        conn.execute("PRAGMA cache_size = -262144")
        conn.execute("PRAGMA wal_autocheckpoint = 20000")


def append_events(conn: Conn, pending: list[tuple]) -> list[int]:
    """One unit of events, over one or more sessions: `pending` is [(session id, agent id, after,
    ids, created_ats, bodies, activity)], the events seq after + 1, after + 2, ... Each session's
    events go in past its `last_seq`, read under its row lock (taken in id order, so two imports
    at once cannot deadlock), and `last_seq` moves in the same transaction; returns how many
    events of each piece went in (0 for events another import wrote meanwhile). The events'
    chain links are left NULL: the server links them at its next start (store/history.py), in
    order. `activity`: (kind, message_from, message_at, at) of the piece's last event and last
    message, for the session's and the agent's activity marks."""
    ids = sorted({sid for sid, *_ in pending})
    last: dict[str, int] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        for sid, seq in conn.execute(f"SELECT id, last_seq FROM sessions WHERE id IN ({', '.join('?' * len(part))})"
                                     " ORDER BY id" + conn.traits.lock_rows, tuple(part)):
            last[sid] = seq
    events: list = []
    moves: list[tuple] = []
    latest: dict[str, tuple] = {}
    written: list[int] = []
    for sid, agent_id, after, event_ids, ats, bodies, activity in pending:
        have, n = last.get(sid), len(event_ids)
        if have is None or not after <= have < after + n:
            written.append(0)   # not here, all written already, or a gap before the piece
            continue
        skip = have - after
        end = after + n
        # The rows as the INSERT binds them, made only here (zip: no list of tuples kept).
        events.append(zip(repeat(sid), range(have + 1, end + 1), event_ids[skip:], ats[skip:], bodies[skip:]))
        last[sid] = end
        kind, message_from, message_at, at = activity
        moves.append((end, message_at, message_from, sid))
        if agent_id not in latest or at >= latest[agent_id][4]:
            latest[agent_id] = (agent_id, sid, kind, message_from, at)
        written.append(n - skip)
    if events:
        conn.executemany("INSERT INTO session_events (session_id, seq, id, created_at, body) VALUES (?, ?, ?, ?, ?)",
                         chain.from_iterable(events))
        conn.executemany("UPDATE sessions SET last_seq = ?, message_at = coalesce(?, message_at),"
                         " message_from = coalesce(?, message_from) WHERE id = ?", moves)
        for agent_id, sid, kind, message_from, at in latest.values():
            agents_q.record_activity(conn, agent_id, sid, kind, message_from, at)
    return written


def attachment_present(conn: Conn, session_id: str, attachment_id: str) -> bool:
    return conn.execute("SELECT 1 FROM session_attachments WHERE session_id = ? AND id = ?",
                        (session_id, attachment_id)).fetchone() is not None


def memory_present(conn: Conn, agent_id: str, path: str) -> bool:
    return conn.execute("SELECT 1 FROM memory_files WHERE agent_id = ? AND path = ?",
                        (agent_id, path)).fetchone() is not None


def run(conn: Conn, row: dict) -> bool:
    columns = ", ".join(row)
    return _insert(conn, f"INSERT INTO runs ({columns}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


def journal(conn: Conn, run_id: str, entries: list[tuple[int, bytes, int]]) -> int:
    """The run's journal, when it has none yet (whole, or not at: one transaction)."""
    if conn.execute("SELECT 1 FROM run_journal WHERE run_id = ? LIMIT 1", (run_id,)).fetchone():
        return 0
    conn.executemany("INSERT INTO run_journal (run_id, seq, entry, created_at) VALUES (?, ?, ?, ?)",
                     [(run_id, seq, entry, at) for seq, entry, at in entries])
    conn.execute("UPDATE runs SET journal_entries = ?, journal_bytes = ? WHERE id = ?",
                 (len(entries), sum(len(e) for _, e, _ in entries), run_id))
    return len(entries)


def wait(conn: Conn, run_id: str, wait_id: str, account_id: str, match: bytes, timeout_at: int | None,
         created_at: int) -> bool:
    return _insert(conn, "INSERT INTO run_event_waits (run_id, wait_id, account_id, match, timeout_at, created_at)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (run_id, wait_id, account_id, match, timeout_at, created_at))


def firing(conn: Conn, row: tuple) -> bool:
    """(id, account_id, agent_id, trigger_id, activity_key, status, session_id, activity_cbor, error, created_at,
    summary)."""
    if conn.execute("SELECT 1 FROM trigger_firings WHERE id = ?", (row[0],)).fetchone():
        return False
    return _insert(conn, "INSERT INTO trigger_firings (id, account_id, agent_id, trigger_id, activity_key, status,"
                         " session_id, activity_cbor, error, created_at, summary)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)


def watermark(conn: Conn, row: tuple) -> bool:
    return _insert(conn, "INSERT INTO activity_watermarks (account_id, server_url, cursor_cbor, last_poll_at,"
                         " last_success_at, last_error) VALUES (?, ?, ?, ?, ?, ?)", row)


def idempotency(conn: Conn, account_id: str, action: str, client_id: str, fingerprint: bytes, response: bytes,
                created_at: int) -> bool:
    """A remembered answer (server/handlers/idempotency.py reads it): a retry after the move gets it."""
    return _insert(conn, "INSERT INTO idempotency (account_id, action, client_id, fingerprint, response, created_at)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (account_id, action, client_id, fingerprint, response, created_at))


def draft(conn: Conn, row: tuple) -> bool:
    """A hypermedia draft (convert.draft's columns)."""
    return _insert(conn, "INSERT INTO agent_drafts (id, account_id, agent_id, title, content_format, content, metadata,"
                         " edit_target, location_target, path_name, visibility, status, created_at, updated_at,"
                         " published_at, published_id, published_version)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)


def counts(conn: Conn, table: str, where: str, ids: list[str]) -> int:
    """Rows of `table` whose `where` column is one of `ids` (the check after an import)."""
    total = 0
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        total += conn.execute(f"SELECT count(*) FROM {table} WHERE {where} IN ({', '.join('?' * len(part))})",
                              tuple(part)).fetchone()[0]
    return total


def event_bodies(conn: Conn, session_id: str, seqs: list[int]) -> dict[int, bytes]:
    marks = ", ".join("?" * len(seqs))
    return {seq: bytes(body) for seq, body in conn.execute(
        f"SELECT seq, body FROM session_events WHERE session_id = ? AND seq IN ({marks})", (session_id, *seqs))}

"""A user event's envelope in its row (server/store/events.py, history.py): packed without what
the event as stored holds, so an event stored cut (its text moved to an attachment) keeps the
text in its envelope; answered as signed either way."""
from __future__ import annotations

from seed_agents.protocol.api import stored_envelope
from seed_agents.protocol.wire.envelope import sign_envelope, verify_envelope
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.store import agents, events, history, sessions

KEY = Keypair.from_seed(bytes([5] * 32))
DEFINITION = {"name": "a", "modelProvider": "echo", "model": "echo"}


def message(text: str) -> tuple[dict, bytes]:
    raw = sign_envelope(KEY, {"_": "MessageSession", "sessionId": "s1",
                              "content": [{"type": "text", "text": text}]}, ts=1_764_900_000_000)
    env = verify_envelope(raw, now_ms=None)
    payload = {"type": "message", "role": "user", "content": text,
               "meta": {"accountId": env.account_id, "signerId": env.signer_id}}
    return payload, raw


def kept_and_answered(conn, seq: int) -> tuple[bytes, bytes]:
    kept = bytes(conn.execute("SELECT envelope FROM session_events WHERE session_id = 's1' AND seq = ?",
                              (seq,)).fetchone()[0])
    rows, _ = history.chain_page(conn, "s1", seq - 1, 1, 1 << 20)
    return kept, rows[0][2]


def test_an_envelope_is_packed_against_its_event_as_stored(conn):
    agents.create_agent(conn, "a1", KEY.account_id, DEFINITION, "/d", 1)
    sessions.create_session(conn, "s1", KEY.account_id, "a1", None, 1)
    payload, raw = message("short enough to keep whole")
    events.append_event(conn, "s1", payload, "e1", 10, envelope=raw)
    kept, answered = kept_and_answered(conn, 1)
    assert stored_envelope.is_packed(kept) and len(kept) < len(raw) and answered == raw
    assert b"short enough" not in kept
    # Over the event bound the text is cut into an attachment: the envelope keeps the text.
    payload, raw = message("long " * 2_000)
    event, _ = events.append_event(conn, "s1", payload, "e2", 11, max_bytes=4_000, envelope=raw)
    assert "cut" in event["event"]["meta"]
    kept, answered = kept_and_answered(conn, 2)
    assert stored_envelope.is_packed(kept) and ("long " * 2_000).encode() in kept
    assert answered == raw

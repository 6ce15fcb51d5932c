"""Events too large to store or answer whole.

A stored event is at most `max_bytes` (`--max-event-bytes` for what the runtime records: the
model's replies, tool calls and results). When one would be larger, its largest fields are
moved, whole, into a session attachment (server/store/attachments.py: private to the session,
deleted with it, read with `ReadSessionAttachment` or the agent's `read attachment:<id>`), and
the event keeps the beginning of each with a sentence saying where the rest is, plus
`meta.cut = [{field, size, attachment?}]`. When the session has no room for another attachment,
the rest is dropped and the sentence says so. Nothing is ever refused: the turn goes on.

An event stored before this bound (or under a larger one) that is over what one answer carries
is answered as a `stand_in`: an `error` event in its place, same id and seq, saying so.
"""
from __future__ import annotations

import json


from ..database.port import Conn
from . import attachments, codec
from .errors import Refused

# Fields never moved: they say what the event is and where it belongs.
_KEPT = frozenset(("type", "id", "toolCallId", "name", "role", "actor", "status"))
_EXTENSION = {"text/markdown": "md", "application/json": "json"}


def spill(conn: Conn, session_id: str, event_id: str, event: dict, max_bytes: int, now: int) -> bytes:
    """`event` (a SessionEvent, changed in place) made to encode within `max_bytes`: its payload's
    largest fields moved into attachments, largest first. Returns the new body."""
    payload = dict(event["event"])
    event["event"] = payload
    head_bytes = max(256, max_bytes // 4)   # of each field kept: room for several cut fields and meta
    cuts: list[dict] = []
    body = codec.encode(event)
    sizes = sorted(((len(codec.encode(v)), k) for k, v in payload.items() if k not in _KEPT), reverse=True)
    for _size, key in sizes:
        if len(body) <= max_bytes:
            break
        value = payload[key]
        is_text = isinstance(value, str)
        data = value.encode() if is_text else json.dumps(value, ensure_ascii=False, default=str).encode()
        mime = "text/markdown" if key == "content" else "text/plain" if is_text else "application/json"
        name = f"{payload.get('type', 'event')}-{key}-{event_id}.{_EXTENSION.get(mime, 'txt')}"
        info = _attach(conn, session_id, name, mime, data, now)
        where = (f"the whole of it is attachment {info['id']} ({name}) of this session" if info is not None
                 else "the rest was not kept (the session has no room for another attachment)")
        note = f"[cut here: this {key} was {len(data)} bytes, more than one event stores; {where}]"
        head = data[:head_bytes].decode("utf-8", "ignore")
        payload[key] = f"{head}\n\n{note}" if is_text else {"truncated": True, "note": note, "content": head}
        cut: dict = {"field": key, "size": len(data)}
        if info is not None:
            cut["attachment"] = info
        cuts.append(cut)
        if key != "meta":
            meta = payload.get("meta")
            payload["meta"] = {**(meta if isinstance(meta, dict) else {}), "cut": cuts}
        body = codec.encode(event)
    return body


def _attach(conn: Conn, session_id: str, name: str, mime: str, data: bytes, now: int) -> dict | None:
    row = conn.execute("SELECT account_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        return None
    try:
        return attachments.save(conn, session_id, row[0], name, mime, data, now)
    except Refused:   # the session's attachments are full: the event is cut all the same
        return None


def stand_in(session_id: str, seq: int, event_id: str, created_at: int, size: int, max_bytes: int) -> bytes:
    """The stored body answered in place of an event of `size` bytes, over `max_bytes`."""
    return codec.encode({"id": event_id, "sessionId": session_id, "seq": seq, "createdAt": created_at,
                         "event": {"type": "error", "message": (
                             f"This event is {size} bytes, more than one answer carries ({max_bytes} bytes); it was "
                             "stored before events were bounded and is not shown.")}})

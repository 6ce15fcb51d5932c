"""A user event's signed envelope as its row keeps it: without what the event already holds.

An export must hold the envelope's exact bytes (docs/protocol.md, "Verifiable history"), but
most of them are in the user event too: the text is the event's `content`, the session id its
`sessionId`, the signer and account its `meta`, and the frame around them is the fixed
five-field layout (protocol/wire/envelope.py). Stored whole, a message's text is kept twice and
a short message's row nearly doubles. So the row keeps one of two packed forms:

    0x02 | uint: the action's ts | the 64-byte sig
        for the action a client sends for one text part: {_: "MessageSession", ts, content:
        [{type: "text", text}], sessionId, clientMessageId?}, whose every other byte the event
        holds, so it is encoded again from the event and the ts (when packed, checked to be
        that action: compared whole, or as a value when the caller has the action verification
        decoded from these canonical bytes, since each value has one canonical encoding);
    0x01 | uint: where the text was cut + 1 (0: not cut) | uint: where the session id was cut + 1
         | the 64-byte sig | the action's bytes with the text's, then the session id's,
           encoding taken out
        for any other action: each cut takes out bytes equal to the DAG-CBOR of a value the
        event holds, wherever they were found, and `unpack` inserts that same encoding at the
        same offset, so the rebuilt bytes are exact by construction.

Only the five-field layout is packed, and only when the event's meta names the envelope's own
signer and account; anything else is kept whole. A whole envelope starts with a map head
(0xa0-0xbb), never 0x01 or 0x02: rows stored whole (before packing, or not packable) are read
back as they are.
"""
from __future__ import annotations

from ..wire.dagcbor import encode_head, shortest_head_at
from ..wire.envelope import five_fields, join_five_fields
from ..wire.errors import ProtocolError
from ..wire.principals import principal_from_string


def _text(value: str) -> bytes:
    data = value.encode()
    return encode_head(3, len(data)) + data


PACKED = 0x01   # cuts
SHAPED = 0x02   # the one-text-part action, encoded again
_PACKED, _SHAPED = bytes((PACKED,)), bytes((SHAPED,))
_SIG = 64

# The one-text-part action's bytes around what the event holds, keys in DAG-CBOR order (length,
# then bytes): _, ts, content (its part's keys: text, type), sessionId, clientMessageId.
_NAME_TS = _text("_") + _text("MessageSession") + _text("ts")
_CONTENT = _text("content") + b"\x81\xa2" + _text("text")
_PART_TYPE = _text("type") + _text("text")
_SESSION = _text("sessionId")
_CLIENT_ID = _text("clientMessageId")
_TS_AT = 1 + len(_NAME_TS)   # after the map's head


def is_packed(stored: bytes) -> bool:
    return stored[:1] in (_PACKED, _SHAPED)


def _shaped(ts: int, text: str, session_id: str, client_id: str | None) -> bytes:
    """The one-text-part action's canonical bytes (docstring above)."""
    return b"".join((b"\xa4" if client_id is None else b"\xa5", _NAME_TS, encode_head(0, ts), _CONTENT,
                     _text(text), _PART_TYPE, _SESSION, _text(session_id),
                     b"" if client_id is None else _CLIENT_ID + _text(client_id)))


def _shaped_value(ts: int, text: str, session_id: str, client_id: str | None) -> dict:
    """The one-text-part action as a value (`_shaped`'s bytes decoded)."""
    value = {"_": "MessageSession", "ts": ts, "content": [{"type": "text", "text": text}], "sessionId": session_id}
    if client_id is not None:
        value["clientMessageId"] = client_id
    return value


def _held(event: object) -> tuple[str, str, str, str] | None:
    """(session id, text, account id, signer id) of a stored user event, or None when any is
    missing or not a string (its clientMessageId: `_client_id`)."""
    if type(event) is not dict:
        return None
    payload = event.get("event")
    meta = payload.get("meta") if type(payload) is dict else None
    if type(meta) is not dict:
        return None
    held = session_id, text, account_id, signer_id = (event.get("sessionId"), payload.get("content"),
                                                         meta.get("accountId"), meta.get("signerId"))
    if type(session_id) is str and type(text) is str and type(account_id) is str and type(signer_id) is str:
        return held
    return None


def _principals(account_id: str, signer_id: str) -> tuple[bytes, bytes] | None:
    """(signer, account) named by the event's meta, or None when either is no principal."""
    try:
        return principal_from_string(signer_id), principal_from_string(account_id)
    except ProtocolError:
        return None


def _client_id(event: dict) -> str | None:
    value = event["event"].get("clientMessageId")
    return value if type(value) is str else None


def _cut(data: bytes, part: bytes) -> tuple[bytes, int]:
    at = data.find(part)
    return (data, 0) if at < 0 else (data[:at] + data[at + len(part):], at + 1)


def _put(data: bytes, part: bytes, at: int) -> bytes:
    return data if at == 0 else data[:at - 1] + part + data[at - 1:]


def pack(raw: bytes, event: dict, decoded: dict | None = None) -> bytes:
    """The form the row keeps of `raw`, the envelope that caused the user event `event` (the
    SessionEvent as stored): packed when it rebuilds exactly, else `raw` itself.

    `decoded`: the envelope's action as verification decoded it from these bytes, when at hand.
    Canonical DAG-CBOR has one encoding per value, so the action is then the shaped one when its
    value is, and is compared as a value instead of being encoded again."""
    parts = five_fields(raw)
    held = _held(event)
    if parts is None or held is None:
        return raw
    sig, action, signer, account = parts
    session_id, text, account_id, signer_id = held
    if _principals(account_id, signer_id) != (signer, account):
        return raw   # (the server writes the envelope's own principals in the meta)
    if decoded is not None:
        ts = decoded.get("ts")
        # (ts an int, not a bool or a float equal to one: the one type whose values Python's
        # == would let through unequal; every other value compared is text)
        if type(ts) is int and 0 <= ts < 1 << 64 and decoded == _shaped_value(ts, text, session_id, _client_id(event)):
            return b"".join((_SHAPED, encode_head(0, ts), sig))
    else:
        found = shortest_head_at(action, _TS_AT, 0)
        if found is not None and action == _shaped(found[0], text, session_id, _client_id(event)):
            return b"".join((_SHAPED, encode_head(0, found[0]), sig))
    # Each cut takes out the encoding of a value the event holds and records where, so `unpack`
    # puts the same bytes back at the same place: exact by construction, whatever was found.
    text_bytes, session_bytes = _text(text), _text(session_id)
    action, text_at = _cut(action, text_bytes)
    action, session_at = _cut(action, session_bytes)
    return b"".join((_PACKED, encode_head(0, text_at), encode_head(0, session_at), sig, action))


def unpack(stored: bytes, event: object) -> bytes:
    """The envelope's bytes from what the row keeps and its stored event. A row kept whole is
    returned as it is; so are a packed row's bytes when the event no longer holds what was cut
    out (an edited store): what comes back then is no envelope, and a verifier says so for
    this event."""
    held = _held(event) if is_packed(stored) else None
    if held is None:
        return stored
    session_id, text, account_id, signer_id = held
    principals = _principals(account_id, signer_id)
    if principals is None:
        return stored
    if stored[0] == SHAPED:   # its ts, then the sig; the action encoded again
        ts = shortest_head_at(stored, 1, 0)
        if ts is None or len(stored) != ts[1] + _SIG:
            return stored
        sig = stored[ts[1]:]
        action = _shaped(ts[0], text, session_id, _client_id(event))   # type: ignore[arg-type]
    else:   # where the text and the session id were cut, the sig, the action without them
        text_head = shortest_head_at(stored, 1, 0)
        session_head = shortest_head_at(stored, text_head[1], 0) if text_head else None
        if text_head is None or session_head is None or len(stored) < session_head[1] + _SIG:
            return stored
        start = session_head[1]
        sig = stored[start:start + _SIG]
        action = _put(_put(stored[start + _SIG:], _text(session_id), session_head[0]), _text(text), text_head[0])
    return join_five_fields(sig, action, *principals)

"""Sans-I/O helpers for v2 request frames: {id, envelope} and {id, _: "Unsubscribe", key}."""
from __future__ import annotations

from protocol import dagcbor
from protocol.errors import ProtocolError

# Canonical {id, envelope}: a2, "id", <uint>, "envelope", <envelope>. When a client sends it this
# way (ours does), the envelope's own bytes are sliced out and verified on the fast path.
_ID_KEY = b"\xa2\x62id"
_ENVELOPE_KEY = b"\x68envelope"


def _uint(frame: bytes, pos: int) -> tuple[int, int] | None:
    if pos >= len(frame):
        return None
    head = frame[pos]
    if head >> 5 != 0:
        return None
    info = head & 0x1F
    if info < 24:
        return info, pos + 1
    width = {24: 1, 25: 2, 26: 4, 27: 8}.get(info)
    if width is None or pos + 1 + width > len(frame):
        return None
    value = int.from_bytes(frame[pos + 1:pos + 1 + width], "big")
    if value < (24 if width == 1 else 1 << (4 * width)):  # must be minimal
        return None
    return value, pos + 1 + width


def split_request(frame: bytes) -> tuple[int, bytes] | None:
    """(id, envelope bytes) for a canonical request frame, else None (use `parse_request`)."""
    if not frame.startswith(_ID_KEY):
        return None
    parsed = _uint(frame, 4)
    if parsed is None:
        return None
    req_id, pos = parsed
    if frame[pos:pos + 9] != _ENVELOPE_KEY:
        return None
    return req_id, frame[pos + 9:]


# In a canonical envelope the action map follows `sig` and `type` at a fixed offset, and its
# first key is normally "_" (keys sort by length, then bytewise).
_ACTION_AT = 1 + 4 + 2 + 64 + 5 + 13 + 7   # a5, "sig", 58 40 + sig, "type", "AgentsAction", "action"


def peek_action_name(envelope: bytes) -> str | None:
    """The action name of a canonical envelope, read from its bytes without decoding; None when
    it cannot be read that way. Only a scheduling hint: the envelope is verified as usual."""
    pos = _ACTION_AT
    if len(envelope) < pos + 4 or envelope[pos] & 0xE0 != 0xA0 or envelope[pos + 1:pos + 3] != b"\x61_":
        return None
    head = envelope[pos + 3]
    if head & 0xE0 != 0x60 or head & 0x1F >= 24:
        return None
    start = pos + 4
    try:
        return envelope[start:start + (head & 0x1F)].decode()
    except UnicodeDecodeError:
        return None


def peek_id(frame: bytes) -> int | None:
    """The id of a frame that starts the canonical way (`{id, ...}`), without decoding it."""
    if not frame.startswith(_ID_KEY):
        return None
    parsed = _uint(frame, 4)
    return None if parsed is None else parsed[0]


def parse_request(frame: bytes, *, max_size: int, max_depth: int) -> dict:
    value = dagcbor.decode(frame, max_size=max_size, max_depth=max_depth + 1)
    if not isinstance(value, dict):
        raise ProtocolError(400, "a v2 frame must be a map {id, envelope} or {id, _: 'Unsubscribe', key}")
    return value


def request_id(value: dict) -> int | None:
    req_id = value.get("id")
    if type(req_id) is int and 0 <= req_id < 1 << 64:
        return req_id
    return None


_RESPONSE_KEY = dagcbor.encode("response")


def response_frame(req_id: int, response: dict) -> bytes:
    # {id, response}: "id" sorts before "response"; the response may splice stored events.
    from server.wire_values import encode_value

    return b"".join((_ID_KEY, dagcbor.encode(req_id), _RESPONSE_KEY, encode_value(response)))

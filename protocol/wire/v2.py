"""Reading v2 client frames (CONTRACT section 3) from their bytes: `{id, envelope}` requests and
`{id, _, key}` controls. A canonical request is sliced, not decoded (its envelope's bytes are then
verified on the fast path); any other form is decoded whole. protocol/wire/framing_v2.py uses these.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dagcbor import DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE, decode_canonical, shortest_head_at
from .errors import ProtocolError

# Canonical {id, envelope}: a2, "id", <uint>, "envelope", <envelope>. When a client sends it this
# way (ours does), the envelope's own bytes are sliced out and verified on the fast path.
_ID_KEY = b"\xa2\x62id"
_ENVELOPE_KEY = b"\x68envelope"


def split_request(frame: bytes) -> tuple[int, bytes] | None:
    """(id, envelope bytes) for a canonical request frame, else None (then `decode_v2_request` reads it whole)."""
    if not frame.startswith(_ID_KEY):
        return None
    parsed = shortest_head_at(frame, 4, 0)
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
    parsed = shortest_head_at(frame, 4, 0)
    return None if parsed is None else parsed[0]


@dataclass(frozen=True, slots=True)
class V2Request:
    """A decoded v2 client frame: `message` is the whole map."""

    id: int
    message: dict

    @property
    def kind(self) -> str | None:
        """The control name (e.g. "Unsubscribe") of an unsigned frame, None for a request."""
        kind = self.message.get("_")
        return kind if type(kind) is str else None


def decode_v2_request(
    frame: bytes, *, max_size: int = DEFAULT_MAX_SIZE, max_depth: int = DEFAULT_MAX_DEPTH
) -> V2Request:
    """Step 1 for a v2 frame, plus its `id` (a non-negative integer). ProtocolError 400/413.
    Without a usable id there is nobody to answer, so the caller decides what to do."""
    value, _canonical = decode_canonical(frame, max_size=max_size, max_depth=max_depth)
    if type(value) is not dict:
        raise ProtocolError(400, "a v2 client frame is a map {id, envelope} or "
                                 "{id, _: 'Unsubscribe', key}")
    request_id = value.get("id")
    if type(request_id) is not int or request_id < 0:
        raise ProtocolError(400, "a v2 client frame needs 'id', a non-negative integer")
    return V2Request(request_id, value)

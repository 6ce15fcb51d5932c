"""v2 client frames (CONTRACT section 3): `{id, envelope}` requests and `{id, _, key}` controls.

The frame is decoded once, whole. When it was canonical, the envelope's own canonical bytes are a
slice of it, so verification can cut the signing input from them instead of re-encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._dagcbor_encode import encode
from .dagcbor import DEFAULT_MAX_DEPTH, DEFAULT_MAX_SIZE, decode_canonical
from .envelope import DEFAULT_WINDOW_MS, VerifiedEnvelope, verify_decoded
from .errors import ProtocolError

_ID_KEY = b"\x62id"
_ENVELOPE_KEY = b"\x68envelope"


@dataclass(frozen=True, slots=True)
class V2Request:
    """A decoded v2 client frame. `message` is the whole map; `envelope_bytes` is the canonical
    encoding of `message["envelope"]` when the frame was exactly {id, envelope} and canonical."""

    id: int
    message: dict
    envelope_bytes: bytes | None = None

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
    value, canonical = decode_canonical(frame, max_size=max_size, max_depth=max_depth)
    if type(value) is not dict:
        raise ProtocolError(400, "a v2 client frame is a map {id, envelope} or "
                                 "{id, _: 'Unsubscribe', key}")
    request_id = value.get("id")
    if type(request_id) is not int or request_id < 0:
        raise ProtocolError(400, "a v2 client frame needs 'id', a non-negative integer")
    envelope_bytes = None
    if canonical and len(value) == 2 and "envelope" in value:
        # Canonical {id, envelope}: a2, "id", <id>, "envelope", then the envelope to the end.
        start = 1 + len(_ID_KEY) + len(encode(request_id))
        if frame[start:start + len(_ENVELOPE_KEY)] == _ENVELOPE_KEY:
            envelope_bytes = bytes(frame[start + len(_ENVELOPE_KEY):])
    return V2Request(request_id, value, envelope_bytes)


def verify_v2_request(
    request: V2Request, *, now_ms: int | None, window_ms: int = DEFAULT_WINDOW_MS
) -> VerifiedEnvelope:
    """Steps 1-4 for the envelope of a decoded v2 request (see `verify_envelope`)."""
    if "envelope" not in request.message:
        raise ProtocolError(400, f"v2 request {request.id} has no 'envelope'")
    return verify_decoded(request.message["envelope"], request.envelope_bytes,
                          now_ms=now_ms, window_ms=window_ms)

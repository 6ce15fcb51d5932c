"""Wire frames built from pre-encoded parts, so an event is encoded once, not once per socket."""
from __future__ import annotations

from protocol import dagcbor
from server import jsonwire


# Keys of {_, key, event|events} in DAG-CBOR order (length first): "_", "key", "event"/"events".
_APPEND_PREFIX = b"\xa3" + dagcbor.encode("_") + dagcbor.encode("append") + dagcbor.encode("key")
_EVENT = dagcbor.encode("event")
_EVENTS = dagcbor.encode("events")


def append_cbor(key: str, body: bytes) -> bytes:
    """{_: "append", key, event} with the stored SessionEvent bytes spliced in."""
    return b"".join((_APPEND_PREFIX, dagcbor.encode(key), _EVENT, body))


def append_batch_cbor(key: str, bodies: list[bytes]) -> bytes:
    """{_: "append", key, events: [...]}: the v2 batched replay frame."""
    return b"".join((_APPEND_PREFIX, dagcbor.encode(key), _EVENTS, dagcbor.encode_head(4, len(bodies)), *bodies))


def ws_frame(payload: bytes | str) -> bytes:
    """A complete unmasked, unfragmented server WebSocket frame (RFC 6455): binary for bytes,
    text for str. Server frames carry no mask, so the same bytes serve every subscriber."""
    if type(payload) is str:
        payload, opcode = payload.encode(), 0x81
    else:
        opcode = 0x82
    n = len(payload)
    if n < 126:
        head = bytes((opcode, n))
    elif n < 0x10000:
        head = bytes((opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((opcode, 127)) + n.to_bytes(8, "big")
    return head + payload


class Outgoing:
    """One event to deliver; each framing's bytes are made at most once, on first use."""

    __slots__ = ("key", "seq", "value", "body", "_cbor", "_json", "_ws_cbor", "_ws_json")

    def __init__(self, key: str, value: dict, *, seq: int = 0, body: bytes | None = None) -> None:
        self.key = key
        self.value = value       # the event map (for append: {_, key, event})
        self.seq = seq           # seq of a durable append, else 0
        self.body = body         # stored DAG-CBOR of the SessionEvent, for appends
        self._cbor: bytes | None = None
        self._json: str | None = None
        self._ws_cbor: bytes | None = None
        self._ws_json: bytes | None = None

    def ws_cbor(self) -> bytes:
        if self._ws_cbor is None:
            self._ws_cbor = ws_frame(self.cbor())
        return self._ws_cbor

    def ws_json(self) -> bytes:
        if self._ws_json is None:
            self._ws_json = ws_frame(self.json())
        return self._ws_json

    def cbor(self) -> bytes:
        if self._cbor is None:
            if self.body is not None:
                self._cbor = append_cbor(self.key, self.body)
            else:
                self._cbor = dagcbor.encode(self.value)
        return self._cbor

    def json(self) -> str:
        if self._json is None:
            self._json = jsonwire.dumps(self.value)
        return self._json

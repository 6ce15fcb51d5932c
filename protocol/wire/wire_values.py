"""Response values that carry pre-encoded DAG-CBOR (stored session events), so a GetSession
response splices the stored bytes instead of decoding and re-encoding every event."""
from __future__ import annotations

import os

from . import dagcbor


class RawEvents:
    """A list of SessionEvent maps kept as their stored DAG-CBOR bytes."""

    __slots__ = ("bodies",)

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies

    def __len__(self) -> int:
        return len(self.bodies)

    def decoded(self) -> list:
        # Stored bytes are the server's own canonical encoding: the trusted decoder is enough.
        return [dagcbor.decode_trusted(bytes(b)) for b in self.bodies]

    def cbor(self) -> bytes:
        return dagcbor.encode_head(4, len(self.bodies)) + b"".join(self.bodies)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawEvents):
            return self.bodies == other.bodies
        return self.decoded() == other


# Stands in for a RawEvents while the rest of the map is encoded in one call, then the
# placeholder's encoding is swapped for the raw array. Random, so no real value can match it.
_PLACEHOLDER = os.urandom(24)
_PLACEHOLDER_CBOR = dagcbor.encode(_PLACEHOLDER)


def encode_value(value: object) -> bytes:
    """DAG-CBOR of a response value; a map holding RawEvents is assembled around the raw bytes."""
    pieces = encode_pieces(value)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def encode_pieces(value: object) -> list[bytes]:
    """`encode_value` as the pieces it is joined from: the stored events stay the bytes they
    were read as, so a large answer can be written without being copied into one (a 2 MiB
    GetSession was copied whole three times on the event loop)."""
    if type(value) is RawEvents:
        return [dagcbor.encode_head(4, len(value.bodies)), *value.bodies]
    if type(value) is dict:
        raw = [(k, v) for k, v in value.items() if type(v) is RawEvents]
        if raw:
            if len(raw) > 1:
                raise ValueError("at most one RawEvents per response")
            key, events = raw[0]
            encoded = dagcbor.encode({**value, key: _PLACEHOLDER})
            at = encoded.index(_PLACEHOLDER_CBOR)
            return [encoded[:at], dagcbor.encode_head(4, len(events.bodies)), *events.bodies,
                    encoded[at + len(_PLACEHOLDER_CBOR):]]
    return [dagcbor.encode(value)]


def plain(value: object) -> object:
    """The same value with RawEvents decoded (for idempotency records and tests)."""
    if type(value) is RawEvents:
        return value.decoded()
    if type(value) is dict:
        return {k: plain(v) for k, v in value.items()}
    return value

"""Response values that carry pre-encoded DAG-CBOR (stored session events), so a GetSession
response splices the stored bytes instead of decoding and re-encoding every event."""
from __future__ import annotations

from protocol import dagcbor
from server.frames import cbor_head


class RawEvents:
    """A list of SessionEvent maps kept as their stored DAG-CBOR bytes."""

    __slots__ = ("bodies",)

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies

    def __len__(self) -> int:
        return len(self.bodies)

    def decoded(self) -> list:
        return [dagcbor.decode(b) for b in self.bodies]

    def cbor(self) -> bytes:
        return cbor_head(4, len(self.bodies)) + b"".join(self.bodies)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RawEvents):
            return self.bodies == other.bodies
        return self.decoded() == other


def _key_order(item: tuple[str, object]) -> tuple[int, bytes]:
    k = item[0].encode()
    return len(k), k


def encode_value(value: object) -> bytes:
    """DAG-CBOR of a response value; a map holding RawEvents is assembled around the raw bytes."""
    if type(value) is RawEvents:
        return value.cbor()
    if type(value) is dict and any(type(v) is RawEvents for v in value.values()):
        items = sorted(value.items(), key=_key_order)
        parts = [cbor_head(5, len(items))]
        for k, v in items:
            parts.append(dagcbor.encode(k))
            parts.append(encode_value(v))
        return b"".join(parts)
    return dagcbor.encode(value)


def plain(value: object) -> object:
    """The same value with RawEvents decoded (for idempotency records and tests)."""
    if type(value) is RawEvents:
        return value.decoded()
    if type(value) is dict:
        return {k: plain(v) for k, v in value.items()}
    return value

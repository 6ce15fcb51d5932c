"""What a WebSocket framing reads out of a client frame (the same shapes for v1 and v2)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """A signed action to run: `id` is v2's request id (None in v1); `envelope` is the frame's
    bytes, or the decoded envelope map when it could not be sliced out canonically."""
    id: int | None
    envelope: bytes | dict


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """v2's unsigned control frame."""
    id: int
    key: object


@dataclass(frozen=True, slots=True)
class Refusal:
    """A frame answered without running anything: `id` when the request's id could be read."""
    id: int | None
    value: dict

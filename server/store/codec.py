"""DAG-CBOR for stored maps (definitions, configs, event bodies), via seed_agents.protocol.wire.dagcbor.

Stored bytes are the canonical encoding, because event bodies are spliced into wire frames
without re-encoding.
"""
from __future__ import annotations

from typing import Any

from seed_agents.protocol.wire import dagcbor


def encode(value: Any) -> bytes:
    return dagcbor.encode(value)


def decode(data: bytes) -> Any:
    """Stored bytes are ours and canonical (checked when they were written), so they skip the
    strict checks: a turn decodes its whole history, and that must stay cheap."""
    return dagcbor.decode_trusted(bytes(data))

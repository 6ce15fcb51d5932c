"""DAG-CBOR for stored maps (definitions, configs, event bodies), via protocol.dagcbor.

Imported lazily so the store module loads without the protocol package. Stored bytes are the
canonical encoding, because event bodies are spliced into wire frames without re-encoding.
"""
from __future__ import annotations

from typing import Any

# What we stored we wrote ourselves: the wire limits (1 MiB, depth 64) do not apply, and an event
# nests its payload one level deeper than the frame that carried it.
_STORED_MAX_DEPTH = 256


def encode(value: Any) -> bytes:
    from protocol import dagcbor

    return dagcbor.encode(value)


def decode(data: bytes) -> Any:
    from protocol import dagcbor

    data = bytes(data)
    return dagcbor.decode(data, max_size=len(data), max_depth=_STORED_MAX_DEPTH)

"""DAG-CBOR for stored maps (definitions, configs, event bodies), via protocol.dagcbor.

Imported lazily so the store loads without the protocol package; stored bytes must be the
canonical encoding because event bodies are spliced into wire frames without re-encoding.
"""
from __future__ import annotations

from typing import Any


def encode(value: Any) -> bytes:
    from protocol import dagcbor

    return dagcbor.encode(value)


def decode(data: bytes) -> Any:
    from protocol import dagcbor

    return dagcbor.decode(bytes(data))

"""JSON text for v1 frames. Bytes and CIDs follow the DAG-JSON convention so nothing is lost."""
from __future__ import annotations

import base64
import json

from multiformats import CID


def _default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"/": {"bytes": base64.b64encode(bytes(value)).decode().rstrip("=")}}
    if hasattr(value, "decoded"):  # server.wire_values.RawEvents
        return value.decoded()
    if isinstance(value, CID):
        return {"/": str(value)}
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default, allow_nan=False)


def dumps(value: object) -> str:
    return _encoder.encode(value)

"""JSON text for v1 frames: lives in protocol/framing_v1.py (this name is kept for its callers)."""
from protocol.framing_v1 import dumps

__all__ = ["dumps"]

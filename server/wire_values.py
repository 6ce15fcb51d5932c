"""Response values that carry stored DAG-CBOR: the handlers' name for protocol.wire_values
(pure, so the framings in protocol/ encode responses with it)."""
from protocol.wire_values import RawEvents, encode_value, plain

__all__ = ["RawEvents", "encode_value", "plain"]

"""Errors a client can see.

Every failure that reaches the wire carries a status from the contract (section 2, "Errors"),
so the server can answer `{_: "Error", status, message}` without guessing.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A refusal with an HTTP-like contract status and a message meant for the client developer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.message!r})"


class DagCborError(ProtocolError):
    """Bytes that are not strict DAG-CBOR, or a value that cannot be encoded as DAG-CBOR.

    Status 400, or 413 when the input is larger than the limit. Defined here rather than in
    `dagcbor.py` so the encoder and the strict decoder (separate modules) can raise it without an
    import cycle; `seed_agents.protocol.wire.dagcbor.DagCborError` is the same class.
    """

    def __init__(self, status: int | str, message: str | None = None) -> None:
        # Same signature as ProtocolError; `DagCborError("msg")` is also accepted and means 400.
        if message is None:
            status, message = 400, str(status)
        super().__init__(int(status), message)


QUOTE_LIMIT = 40


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A short, escaped rendering of a client-supplied value for an error message.

    Messages must never echo attacker input at length (a 900 KB field must not make a 4.5 MB
    reply): text shows at most `limit` characters, escaped like repr (so control characters and
    quotes cannot forge the message), bytes at most `limit` bytes in hex, and anything else only
    its kind. A cut value says how long it was. The result is at most ~10 * limit characters.
    """
    if type(value) is str:
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if type(value) in (bytes, bytearray, memoryview):
        raw = bytes(value[:limit])
        more = f"... ({len(value)} bytes)" if len(value) > limit else ""
        return f"0x{raw.hex()}{more}"
    if type(value) is bool or value is None:
        return repr(value)
    if type(value) is int:
        text = str(value) if -(10 ** 40) < value < 10 ** 40 else f"an integer of {value.bit_length()} bits"
        return text
    if type(value) is float:
        return repr(value)
    return {list: "an array", dict: "a map"}.get(type(value), type(value).__name__)

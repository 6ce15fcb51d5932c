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
    import cycle; `protocol.dagcbor.DagCborError` is the same class.
    """

    def __init__(self, status: int | str, message: str | None = None) -> None:
        # Same signature as ProtocolError; `DagCborError("msg")` is also accepted and means 400.
        if message is None:
            status, message = 400, str(status)
        super().__init__(int(status), message)

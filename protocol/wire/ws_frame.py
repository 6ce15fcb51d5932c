"""A WebSocket server frame built from a message (RFC 6455 section 5.2), as bytes: built once
per event and framing, then shared by every socket (server/live/frames.py), which is why it
is pure and lives here rather than beside the connection that writes it."""
from __future__ import annotations


def ws_frame(message: bytes | str) -> bytes:
    """A complete, unfragmented, unmasked server frame: binary for bytes, text for str."""
    if type(message) is str:
        message, opcode = message.encode(), 0x81
    else:
        opcode = 0x82
    n = len(message)
    if n < 126:
        head = bytes((opcode, n))
    elif n < 0x10000:
        head = bytes((opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((opcode, 127)) + n.to_bytes(8, "big")
    return head + message

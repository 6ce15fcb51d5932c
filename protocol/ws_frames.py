"""Complete server WebSocket frames (RFC 6455), built from a payload without any socket.

Server frames are unmasked, so the same bytes serve every subscriber of an event: each event's
frame is built once, whatever the number of sockets it goes to.
"""
from __future__ import annotations


def ws_frame(payload: bytes | str) -> bytes:
    """An unfragmented frame: binary for bytes, text for str."""
    if type(payload) is str:
        payload, opcode = payload.encode(), 0x81
    else:
        opcode = 0x82
    n = len(payload)
    if n < 126:
        head = bytes((opcode, n))
    elif n < 0x10000:
        head = bytes((opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((opcode, 127)) + n.to_bytes(8, "big")
    return head + payload

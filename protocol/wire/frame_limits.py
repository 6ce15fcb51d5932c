"""How large one action's envelope may be (CONTRACT sections 6 and 8): the upload actions carry one
file chunk plus envelope overhead; every other action keeps the server's frame limit (1 MiB by
default). Read from the action's name, which `seed_agents.protocol.wire.v2.peek_action_name` finds in a canonical
envelope's first bytes, so a frame is judged before it is decoded; after verification the server
checks the name again (a non-canonical envelope is held to the plain limit).
"""
from __future__ import annotations

from .file_rules import MAX_UPLOAD_CHUNK_BYTES
from .v2 import peek_action_name

UPLOAD_ACTIONS = frozenset({"UploadSessionAttachment", "AppendFileUploadChunk", "WriteAgentMemoryFile"})
ENVELOPE_OVERHEAD = 64 * 1024   # the rest of an upload action and its envelope, with room to spare
UPLOAD_FRAME_BYTES = MAX_UPLOAD_CHUNK_BYTES + ENVELOPE_OVERHEAD


def frame_limit(action_name: str | None, default: int) -> int:
    """The largest envelope, in bytes, for an action of this name."""
    if action_name in UPLOAD_ACTIONS:
        return max(default, UPLOAD_FRAME_BYTES)
    return default


def envelope_limit(head: bytes, default: int) -> int:
    """`frame_limit` for the envelope whose first bytes are `head` (at least ~100 of them)."""
    return frame_limit(peek_action_name(head), default)


def largest(default: int) -> int:
    """The largest envelope of any action: what may be read before the name is known."""
    return max(default, UPLOAD_FRAME_BYTES)

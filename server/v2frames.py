"""The server's v2 response frame: {id, response}, where a response may splice stored events.
Parsing v2 requests is sans-I/O and lives in protocol.v2."""
from __future__ import annotations

from protocol import dagcbor

_ID_KEY = b"\xa2\x62id"
_RESPONSE_KEY = dagcbor.encode("response")


def response_frame(req_id: int, response: dict) -> bytes:
    # {id, response}: "id" sorts before "response"; the response may splice stored events.
    from server.wire_values import encode_value

    return b"".join((_ID_KEY, dagcbor.encode(req_id), _RESPONSE_KEY, encode_value(response)))

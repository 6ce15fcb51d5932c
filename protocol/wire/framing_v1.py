"""The v1 WebSocket framing (CONTRACT section 3; what the Seed desktop uses to follow sessions):
binary DAG-CBOR envelopes in (or a text frame holding a JSON array of their byte values), JSON
text out, requests answered in the order received, `subscribed` / `error` for Subscribe.

Pure: frames in, messages out (text: str); server/transport/wsconn.py puts the WebSocket frame header on
them, once per event for every socket (server/live/frames.py).
"""
from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, repeat
from typing import cast

import orjson
from multiformats import CID

from . import dagcbor, events
from .framing_types import Refusal, Request
from .v2 import peek_action_name

__all__ = ["V1Framing", "decode_bodies", "decode_bodies_loose", "dumps"]


def _default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"/": {"bytes": base64.b64encode(bytes(value)).decode().rstrip("=")}}
    if hasattr(value, "decoded"):  # seed_agents.protocol.wire.wire_values.RawEvents
        return value.decoded()
    if isinstance(value, CID):
        return {"/": str(value)}
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


_orjson_dumps = orjson.dumps
_orjson_default = partial(orjson.dumps, default=_default)
_head16 = struct.Struct(">BBH").pack   # a WebSocket frame's header, payload length 126..65535
_head64 = struct.Struct(">BBQ").pack


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default, allow_nan=False)
# The standard library's C encoder with the same settings, made once (not at every call), less
# the circular-reference check (a value here is decoded or built by the server, never cyclic; a
# cycle would still fail, as RecursionError): only for what orjson refuses, below.
_c_encode = json.encoder.c_make_encoder(   # type: ignore[attr-defined]
    None, _default, json.encoder.encode_basestring, None, ":", ",", False, False, False) \
    if json.encoder.c_make_encoder is not None else None   # type: ignore[attr-defined]


def _stdlib(value: object) -> str:
    if _c_encode is None:
        return _encoder.encode(value)
    return "".join(_c_encode(value, 0))


def dumps_utf8(value: object) -> bytes:
    """JSON text for v1, as UTF-8 bytes: compact, non-ASCII unescaped, keys in the value's order;
    bytes and CIDs as DAG-JSON has them. orjson (~6x the standard library's encoder on an event,
    and bytes straight away: docs/performance.md), the same text as `json.dumps(value,
    ensure_ascii=False, separators=(",", ":"))` but for a float's exponent (`1e16`, not `1e+16`:
    the same number; docs/protocol.md). What orjson refuses (an integer past 64 bits, a key that
    is not a string, nesting past 254 levels) goes through the standard library, as before."""
    try:
        return _orjson_dumps(value, default=_default)
    except TypeError:   # orjson.JSONEncodeError; a value neither can send fails below as before
        return _stdlib(value).encode()


def dumps(value: object) -> str:
    """JSON text for v1 (`dumps_utf8`, as text)."""
    return dumps_utf8(value).decode()


def decode_bodies(count: int, joined: bytes) -> list:
    """`count` stored bodies (DAG-CBOR this program wrote), one after the other, decoded in one
    call: the CBOR array they make together."""
    return cast("list", dagcbor.decode_trusted(dagcbor.encode_head(4, count) + joined))


def decode_bodies_loose(count: int, joined: bytes) -> list | None:
    """`decode_bodies` by the faster decoder that reads a CID as bytes (dagcbor.
    decode_trusted_many_loose): for `frames_of(..., loose=True)`, which tells when that matters."""
    return dagcbor.decode_trusted_many_loose(count, joined)


def _text(value: dict) -> str:
    return dumps(value)   # a text message


def byte_array(text: str) -> bytes | None:
    """A text frame holding a JSON array of byte values (integers 0..255), as those bytes."""
    text = text.strip()
    if not text.startswith("["):
        return None
    try:
        values = json.loads(text)
        return bytes(values) if type(values) is list and all(type(v) is int for v in values) else None
    except (ValueError, TypeError):   # bytes() refuses values outside 0..255
        return None


@dataclass(frozen=True, slots=True)
class V1Framing:
    max_frame: int
    name = "v1"
    subprotocol = None
    concurrent = False   # v1 answers in the order received
    replay_derives = True   # a replayed event's frame is derived (JSON), not spliced: worth keeping

    decode_bodies = staticmethod(decode_bodies)   # stored bodies one after the other (a replay page)
    decode_bodies_loose = staticmethod(decode_bodies_loose)

    # -- reading ---------------------------------------------------------------------------
    def read(self, message: bytes | str) -> Request | Refusal:
        if type(message) is str:
            data = byte_array(message)   # the Seed server's other form of a binary frame
            if data is None:
                return Refusal(None, events.error_response(
                    400, "text frames are not actions: send a binary DAG-CBOR SignedActionEnvelope "
                         "(or a JSON array of its byte values)"))
            message = data
        if len(message) > self.max_frame:
            return Refusal(None, events.error_response(
                413, f"frame of {len(message)} bytes is over the limit of {self.max_frame}"))
        return Request(None, message)

    # -- writing ---------------------------------------------------------------------------
    def connected(self, now_ms: int) -> str | None:
        return _text({"_": "connected", "connectedAt": now_ms})

    def reply(self, request: Request, response: dict, action: str | None) -> str:
        """An action's response; a failed Subscribe has v1's lower-case error event."""
        if response.get("_") == "Error":
            if action is None:
                action = _action_name(request.envelope)
            if action == "Subscribe":
                return self.subscribe_failed(request, response)
        return _text(response)

    def subscribed(self, request: Request, key: str, account_id: str, response: dict) -> str:
        return _text(events.subscribed(key, account_id))

    def subscribe_failed(self, request: Request, error: dict) -> str:
        return _text(events.error_event(error["message"], error["status"]))

    def refusal(self, refusal: Refusal) -> str:
        return _text(refusal.value)

    def error_event(self, message: str, status: int) -> str:
        return _text(events.error_event(message, status))

    def event(self, value: dict, body: bytes | None = None) -> str:
        return _text(value)   # JSON: the decoded SessionEvent in `value`, never the stored bytes

    def replay(self, key: str, rows: list) -> list[tuple[str, int]]:
        """Durable events read back for a replay: one `append` message each, with its seq (the
        same text as `replay_frames`, which the server's replay uses)."""
        if not rows:
            return []
        decoded = decode_bodies(len(rows), b"".join(body for _seq, body in rows))
        return [(_text(events.append(key, event)), seq) for (seq, _body), event in zip(rows, decoded)]

    def replay_frames(self, key: str, rows: list) -> tuple[bytes, list[int]]:
        """The complete WebSocket text frames of durable events read back for a replay (rows:
        (seq, stored body)), one `append` each, one after the other, and where each ends: the
        text of `events.append(key, event)`, made without building that map. The stored bodies
        are decoded in one call (the CBOR array they make together)."""
        if not rows:
            return b"", []
        return self.frames_of(key, decode_bodies(len(rows), b"".join(body for _seq, body in rows)))

    def frames_of(self, key: str, decoded: list) -> tuple[bytes, list[int]]:
        """`replay_frames` of events already decoded (SessionEvent maps), below."""
        return self._frames_of(key, decoded, False)

    def frames_of_loose(self, key: str, decoded: list) -> tuple[bytes, list[int]] | None:
        """`frames_of` of events from `decode_bodies_loose` (a CID read as bytes): None when any
        of them holds bytes, which that decoder may have made of a CID (the caller decodes them
        again exactly)."""
        return self._frames_of(key, decoded, True)

    def _frames_of(self, key: str, decoded: list, loose: bool) -> tuple[bytes, list[int]] | None:
        """`replay_frames` of events already decoded (SessionEvent maps): each event's JSON is
        written between the `append` map's constant head and its closing brace. The common case
        (every frame 126..65535 bytes long, nothing orjson refuses) is made without a Python
        step per event: orjson over the list by `map`, the headers by `map`, the parts laid out
        by slice assignment (0.2 µs an event less, docs/performance.md "cold")."""
        head = b'{"_":"append","key":' + dumps_utf8(key) + b',"event":'
        fixed = len(head) + 1
        k = len(decoded)
        try:
            texts = list(map(_orjson_dumps, decoded))
        except TypeError:   # bytes or a CID (what `_default` writes), or what orjson refuses
            if loose:
                return None
            try:
                texts = list(map(_orjson_default, decoded))
            except TypeError:   # a big integer, a key that is not a string: event by event
                return self._frames_each(head, decoded)
        sizes = list(map(fixed.__add__, map(len, texts)))
        if not k or min(sizes) < 126 or max(sizes) > 0xFFFF:
            return self._frames_each(head, decoded)
        parts = [head] * (4 * k)
        parts[0::4] = map(_head16, repeat(0x81, k), repeat(126, k), sizes)
        parts[2::4] = texts
        parts[3::4] = repeat(b"}", k)
        return b"".join(parts), list(accumulate(map((4).__add__, sizes)))

    @staticmethod
    def _frames_each(head: bytes, decoded: list) -> tuple[bytes, list[int]]:
        fixed = len(head) + 1
        parts: list[bytes] = []
        ends: list[int] = []
        append, end = parts.append, 0
        for event in decoded:
            try:
                text = _orjson_dumps(event, default=_default)
            except TypeError:
                text = dumps_utf8(event)
            n = fixed + len(text)
            if n < 126:
                append(bytes((0x81, n)))
                end += n + 2
            elif n < 0x10000:
                append(_head16(0x81, 126, n))
                end += n + 4
            else:
                append(_head64(0x81, 127, n))
                end += n + 10
            append(head)
            append(text)
            append(b"}")
            ends.append(end)
        return b"".join(parts), ends

    def replayed(self, key: str, seq: int, head: dict | None = None) -> str | None:
        return None   # v1 has no end-of-replay marker


def _action_name(frame: bytes) -> str | None:
    """The action name of a frame that failed verification, to pick v1's error shape."""
    name = peek_action_name(frame)
    if name is not None:
        return name
    try:
        return dagcbor.decode(frame)["action"]["_"]
    except Exception:  # noqa: BLE001 - best effort only
        return None

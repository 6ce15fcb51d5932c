"""The v2 WebSocket framing (CONTRACT section 3, subprotocol `seed-agents.v2`): binary DAG-CBOR
both ways, `{id, envelope}` requests run concurrently and answered `{id, response}`, unsigned
`Unsubscribe`, CBOR events with stored event bytes spliced in, batched replay and `replayed`.

Pure: frames in, messages out (binary: bytes); server/transport/wsconn.py puts the WebSocket frame header
on them, once per event for every socket (server/live/frames.py). Reading the
request's bytes (slicing a canonical frame, peeking its id) is protocol/wire/v2.py.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import dagcbor, events
from .errors import ProtocolError
from .frame_limits import envelope_limit
from .framing_types import Refusal, Request, Unsubscribe
from .v2 import decode_v2_request, peek_id, split_request
from .wire_values import encode_value

SUBPROTOCOL = "seed-agents.v2"

_ID_KEY = b"\xa2\x62id"
_RESPONSE_KEY = dagcbor.encode("response")
# Keys of {_, key, event|events} in DAG-CBOR order (length first): "_", "key", "event"/"events".
_APPEND_PREFIX = b"\xa3" + dagcbor.encode("_") + dagcbor.encode("append") + dagcbor.encode("key")
_EVENT = dagcbor.encode("event")
_EVENTS = dagcbor.encode("events")


def response_frame(req_id: int, response: dict) -> bytes:
    """{id, response}: "id" sorts before "response"; the response may splice stored events."""
    return b"".join((_ID_KEY, dagcbor.encode(req_id), _RESPONSE_KEY, encode_value(response)))


def append_cbor(key: str, body: bytes) -> bytes:
    """{_: "append", key, event} with the stored SessionEvent bytes spliced in."""
    return b"".join((_APPEND_PREFIX, dagcbor.encode(key), _EVENT, body))


def append_batch_cbor(key: str, bodies: list[bytes]) -> bytes:
    """{_: "append", key, events: [...]}: the batched replay frame."""
    return b"".join((_APPEND_PREFIX, dagcbor.encode(key), _EVENTS, dagcbor.encode_head(4, len(bodies)), *bodies))


def split_append(data: bytes) -> tuple[dict, list[bytes]] | None:
    """What `append_cbor` and `append_batch_cbor` write, read back by a client: the frame
    decoded, and each event's bytes as they came (what the server stored and hashed), or None
    when `data` is not such a frame in canonical DAG-CBOR, every part of it
    (`dagcbor.decode_strict_at`), with nothing after it. None says nothing of why: the caller
    decodes the frame in general, which accepts it or explains the refusal."""
    if not data.startswith(_APPEND_PREFIX):
        return None
    view = memoryview(data)
    frame: dict
    try:
        key, pos = dagcbor.decode_strict_at(view, len(_APPEND_PREFIX))
        if type(key) is not str:
            return None
        if data.startswith(_EVENTS, pos):
            counted = dagcbor.shortest_head_at(data, pos + len(_EVENTS), 4)
            if counted is None or counted[0] > len(data) - counted[1]:
                return None
            events, bodies, pos = dagcbor.decode_strict_run(data, counted[1], counted[0])
            frame = {"_": "append", "key": key, "events": events}
        elif data.startswith(_EVENT, pos):
            start = pos + len(_EVENT)
            event, pos = dagcbor.decode_strict_at(view, start)
            bodies = [data[start:pos]]
            frame = {"_": "append", "key": key, "event": event}
        else:
            return None
    except Exception:  # noqa: BLE001  (not strict DAG-CBOR, whatever the complaint: the caller explains)
        return None
    return (frame, bodies) if pos == len(data) else None


@dataclass(frozen=True, slots=True)
class V2Framing:
    max_frame: int
    max_depth: int
    name = "v2"
    subprotocol = SUBPROTOCOL
    concurrent = True   # requests on one socket run concurrently
    replay_derives = False   # a replay splices the stored bytes (one batched frame a page)

    # -- reading ---------------------------------------------------------------------------
    def read(self, message: bytes | str) -> Request | Unsubscribe | Refusal:
        if type(message) is str:
            return Refusal(None, events.error_response(400, "v2 frames are binary DAG-CBOR maps"))
        split = split_request(message)
        if split is not None:
            req_id, envelope = split
            limit = envelope_limit(envelope, self.max_frame)   # an upload chunk may be larger
            if len(envelope) > limit:
                return Refusal(req_id, events.error_response(
                    413, f"envelope of {len(envelope)} bytes is over the limit of {limit}"))
            return Request(req_id, envelope)
        if len(message) > self.max_frame:
            # Not decoded at all: a large non-canonical frame would cost the strict reader
            # seconds of CPU. The id is answered when it can be read from the frame's head.
            return Refusal(peek_id(message), events.error_response(
                413, f"frame of {len(message)} bytes is over the limit of {self.max_frame}"))
        try:
            # One more level than an envelope may have: the {id, ...} map around it.
            request = decode_v2_request(message, max_size=self.max_frame, max_depth=self.max_depth + 1)
        except ProtocolError as exc:   # no usable id: nobody to answer but the socket
            return Refusal(None, events.error_response(exc.status, exc.message))
        if request.kind == "Unsubscribe":
            return Unsubscribe(request.id, request.message.get("key"))
        if "envelope" not in request.message:
            return Refusal(request.id, events.error_response(
                400, "a v2 request is {id, envelope} or {id, _: 'Unsubscribe', key}"))
        return Request(request.id, request.message["envelope"])

    # -- writing ---------------------------------------------------------------------------
    def connected(self, now_ms: int) -> bytes | None:
        return None   # v2 sends nothing on open

    def reply(self, request: Request, response: dict, action: str | None) -> bytes:
        return response_frame(request.id, response)

    def subscribed(self, request: Request, key: str, account_id: str, response: dict) -> bytes:
        return response_frame(request.id, response)

    def subscribe_failed(self, request: Request, error: dict) -> bytes:
        return response_frame(request.id, error)

    def unsubscribed(self, request: Unsubscribe) -> bytes:
        return response_frame(request.id, {"_": "UnsubscribeResponse", "key": request.key})

    def refusal(self, refusal: Refusal) -> bytes:
        if refusal.id is None:   # nobody to answer by id: an error event on the socket
            value = refusal.value
            return dagcbor.encode(events.error_event(value["message"], value["status"]))
        return response_frame(refusal.id, refusal.value)

    def error_event(self, message: str, status: int) -> bytes:
        return dagcbor.encode(events.error_event(message, status))

    def event(self, value: dict, body: bytes | None = None) -> bytes:
        """An event map; an `append` whose stored SessionEvent bytes are known splices them."""
        if body is not None:
            return append_cbor(value["key"], body)
        return dagcbor.encode(value)

    def replay(self, key: str, rows: list) -> list[tuple[bytes, int]]:
        """Durable events read back for a replay: one batched `append` frame."""
        return [(append_batch_cbor(key, [bytes(body) for _seq, body in rows]), rows[-1][0])]

    def replayed(self, key: str, seq: int, head: dict | None = None) -> bytes | None:
        return dagcbor.encode(events.replayed(key, seq, head))

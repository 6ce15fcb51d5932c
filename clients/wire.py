"""v2 framing, sans I/O: the bytes a client sends and how it reads what comes back.

Every frame in both directions is one DAG-CBOR map (CONTRACT section 3):
requests `{id, envelope}`, unsubscribes `{id, _: "Unsubscribe", key}`, responses
`{id, response}` and events (no `id`).
"""
from __future__ import annotations

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.framing_v2 import append_batch_cbor, append_cbor

SUBPROTOCOL = "seed-agents.v2"

# Server frames nest events (each up to the server's depth limit) inside a few levels of
# framing, and a replay batch can be large; the server is trusted to that extent.
_MAX_DEPTH = 256


def request_frame(req_id: int, envelope: dict) -> bytes:
    return dagcbor.encode({"id": req_id, "envelope": envelope})


def unsubscribe_frame(req_id: int, key: str) -> bytes:
    return dagcbor.encode({"id": req_id, "_": "Unsubscribe", "key": key})


def decode_frame(data: bytes) -> dict:
    # A server's answer may hold many items (a page of agents): only the size bounds it here.
    value = dagcbor.decode(data, max_size=len(data), max_depth=_MAX_DEPTH, max_items=None)
    if not isinstance(value, dict):
        raise ValueError("a v2 server frame must be a map")
    return value


def read_frame(data: bytes) -> tuple[dict, list[bytes] | None]:
    """A server frame, decoded once, and for an `append` frame (one live event or a replay
    batch) each event's bytes as the server stored and hashed them (else None). Canonicity is
    proved as `dagcbor.decode` proves it, by encoding again and comparing; an append frame is
    encoded event by event and rebuilt around the events' bytes, so a client checking the
    session's chain (clients/history.py) hashes those bytes instead of encoding every event a
    second time. Anything else goes to `decode_frame`, which accepts or explains the refusal."""
    try:
        value = dagcbor.decode_unchecked(data, max_depth=_MAX_DEPTH)
    except Exception:  # noqa: BLE001  (malformed: the strict decoder explains it)
        return decode_frame(data), None
    bodies = None
    try:
        if (type(value) is dict and len(value) == 3 and value.get("_") == "append"
                and type(value.get("key")) is str and (type(value.get("events")) is list or "event" in value)):
            if "events" in value:
                bodies = [dagcbor.encode(event) for event in value["events"]]
                rebuilt = append_batch_cbor(value["key"], bodies)
            else:
                bodies = [dagcbor.encode(value["event"])]
                rebuilt = append_cbor(value["key"], bodies[0])
        else:
            rebuilt = dagcbor.encode(value)
    except Exception:  # noqa: BLE001  (a value DAG-CBOR cannot hold: the strict decoder explains it)
        rebuilt = b""
    if rebuilt == data and type(value) is dict:
        return value, bodies
    return decode_frame(data), None


def is_response(frame: dict) -> bool:
    return "id" in frame and "response" in frame


def flatten(event: dict) -> list[dict]:
    """One item per event: a replay batch `{_: "append", key, events: [...]}` becomes
    `{_: "append", key, event}` items, so callers never need to know batches exist."""
    if event.get("_") == "append" and "events" in event:
        key = event.get("key")
        return [{"_": "append", "key": key, "event": e} for e in event["events"]]
    return [event]


def append_seq(item: dict) -> int | None:
    """The seq of a durable append item, else None."""
    if item.get("_") != "append":
        return None
    event = item.get("event")
    seq = event.get("seq") if isinstance(event, dict) else None
    return seq if isinstance(seq, int) else None

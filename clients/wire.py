"""v2 framing, sans I/O: the bytes a client sends and how it reads what comes back.

Every frame in both directions is one DAG-CBOR map (CONTRACT section 3):
requests `{id, envelope}`, unsubscribes `{id, _: "Unsubscribe", key}`, responses
`{id, response}` and events (no `id`).
"""
from __future__ import annotations

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.framing_v2 import split_append

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
    batch) each event's bytes as the server stored and hashed them (else None), so a client
    checking the session's chain (clients/history.py) hashes those bytes. An append frame is
    read by `framing_v2.split_append`, a strict decoder that takes only canonical DAG-CBOR, event
    by event, so its acceptance is the proof of canonicity (docs/performance.md, "Verifying a
    replay"). Any other frame, or an append frame it refuses, is decoded as before: cbor2, and
    canonicity proved by encoding again and comparing; what that does not prove goes to
    `decode_frame`, which accepts it (without bodies) or explains the refusal."""
    split = split_append(data)
    if split is not None:
        return split
    try:
        value = dagcbor.decode_unchecked(data, max_depth=_MAX_DEPTH)
    except Exception:  # noqa: BLE001  (malformed: the strict decoder explains it)
        return decode_frame(data), None
    try:
        rebuilt = dagcbor.encode(value)
    except Exception:  # noqa: BLE001  (a value DAG-CBOR cannot hold: the strict decoder explains it)
        rebuilt = b""
    if rebuilt == data and type(value) is dict:
        return value, None
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

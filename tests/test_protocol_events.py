"""Event and error builders (CONTRACT sections 2 and 5)."""
from __future__ import annotations

import json

from protocol import events
from protocol.dagcbor import decode, encode


def test_shapes():
    ev = {"id": "e", "sessionId": "s", "seq": 1, "event": {"type": "message"}, "createdAt": 1}
    assert events.append("sessions/s", ev) == {"_": "append", "key": "sessions/s", "event": ev}
    assert events.append_batch("sessions/s", (ev,)) == {"_": "append", "key": "sessions/s",
                                                        "events": [ev]}
    assert events.append_partial("sessions/s", "p", {"textDelta": "hi"}) == {
        "_": "appendPartial", "key": "sessions/s", "partialId": "p", "patch": {"textDelta": "hi"}}
    assert events.change("agents/a", {"id": "a"}) == {"_": "change", "key": "agents/a",
                                                       "value": {"id": "a"}}
    assert events.replayed("sessions/s", 4) == {"_": "replayed", "key": "sessions/s", "seq": 4}
    assert events.subscribed("runs/r", "z6Mk") == {"_": "subscribed", "key": "runs/r",
                                                    "accountId": "z6Mk"}
    assert events.error_event("gone") == {"_": "error", "message": "gone"}  # no null status
    assert events.error_event("gone", 404) == {"_": "error", "message": "gone", "status": 404}
    assert events.error_response(409, "replay") == {"_": "Error", "status": 409,
                                                     "message": "replay"}


def test_events_travel_in_both_framings():
    value = events.append_partial("sessions/s", "p", {"textDelta": "é", "done": True})
    assert decode(encode(value)) == value
    assert json.loads(json.dumps(value)) == value

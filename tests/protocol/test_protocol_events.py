"""Event and error builders (CONTRACT sections 2 and 5). Their shapes are checked where a client
sees them, over real sockets (tests/test_server_*.py); here, what holds for every builder."""
from __future__ import annotations

import json

from seed_agents.protocol.wire import events
from seed_agents.protocol.wire.dagcbor import decode, encode


def test_optional_fields_are_omitted_never_null():
    assert "status" not in events.error_event("gone")
    assert events.error_event("gone", 404)["status"] == 404


def test_events_travel_in_both_framings():
    value = events.append_partial("sessions/s", "p", {"textDelta": "é", "done": True})
    assert decode(encode(value)) == value
    assert json.loads(json.dumps(value)) == value

"""Sans-I/O v2 frame helpers (seed_agents.protocol.wire.v2): slicing a canonical request, reading its id and action name."""
from __future__ import annotations

import cbor2

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import build_envelope, sign_envelope
from seed_agents.protocol.wire.v2 import peek_action_name, peek_id, split_request

from tests.wsraw import keypair


def test_split_and_peek_a_canonical_request():
    a = keypair("A")
    env = build_envelope(a, {"_": "GetSession", "sessionId": "s1"})
    frame = dagcbor.encode({"id": 300, "envelope": env})
    req_id, envelope = split_request(frame)
    assert req_id == 300 and envelope == dagcbor.encode(env)
    assert peek_id(frame) == 300
    assert peek_action_name(envelope) == "GetSession"


def test_peeks_give_up_rather_than_guess():
    a = keypair("A")
    env = build_envelope(a, {"_": "ListAgents"})
    unsorted = cbor2.dumps({"envelope": env, "id": 1})
    assert split_request(unsorted) is None and peek_id(unsorted) is None
    # A key that sorts before "_" ("A" < "_") hides the name from the peek: no guess.
    odd = sign_envelope(a, {"_": "ListAgents", "A": 1})
    assert peek_action_name(odd) is None
    assert peek_action_name(b"") is None and peek_action_name(b"\xa5" * 200) is None
    # non-minimal id heads are not read
    assert peek_id(b"\xa2\x62id\x18\x05") is None

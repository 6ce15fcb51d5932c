"""The raw client's framing helpers (clients/raw.py), which bench and tests both rely on to
read and write exactly what the contract says without the library client."""
from __future__ import annotations

import pytest
from websockets.utils import apply_mask

from seed_agents.clients.raw import client_frame, parse_server_frame, response_id, signed_request_frame
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.wsraw import keypair

IDS = [0, 23, 24, 255, 256, 65535, 65536, 2**32, 2**63]


@pytest.mark.parametrize("req_id", IDS)
def test_request_frame_is_the_canonical_encoding(req_id):
    envelope = sign_envelope(keypair("A"), {"_": "ListAgents"}, ts=1)
    frame = signed_request_frame(req_id, envelope)
    assert frame == dagcbor.encode({"id": req_id, "envelope": dagcbor.decode(envelope)})


@pytest.mark.parametrize("req_id", IDS)
def test_response_id_reads_id_and_error_from_the_head(req_id):
    ok = {"_": "ListAgentsResponse", "agents": []}
    error = {"_": "Error", "status": 404, "message": "no"}
    assert response_id(dagcbor.encode({"id": req_id, "response": ok})) == (req_id, False)
    assert response_id(dagcbor.encode({"id": req_id, "response": error})) == (req_id, True)


def test_events_have_no_response_id():
    for event in ({"_": "append", "key": "sessions/s", "event": {"seq": 1}},
                  {"_": "error", "message": "x", "status": 413},
                  {"_": "replayed", "key": "k", "seq": 0}):
        assert response_id(dagcbor.encode(event)) is None


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536])
def test_frames_round_trip_in_every_length_form(size):
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    masked = client_frame(payload)
    # the server side of the same frame: unmask it, then parse it as a server frame
    head_len = len(masked) - size - 4
    mask = masked[head_len:head_len + 4]
    unmasked = bytes((masked[0], masked[1] & 0x7F)) + masked[2:head_len] + apply_mask(masked[head_len + 4:], mask)
    buf = unmasked + b"\x89\x00"   # a ping after it
    opcode, got, end = parse_server_frame(buf)
    assert (opcode, got, end) == (2, payload, len(unmasked))
    assert parse_server_frame(buf, end) == (9, b"", len(buf))
    for cut in (1, head_len - 1, len(unmasked) - 1):   # an incomplete frame waits for more
        if 0 <= cut < len(unmasked):
            assert parse_server_frame(unmasked[:cut]) is None

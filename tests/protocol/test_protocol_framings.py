"""The three framings as pure objects: bytes in, messages out (server/transport/wsconn.py frames them), no
socket."""
from __future__ import annotations

import json

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.protocol.wire.frame_limits import UPLOAD_FRAME_BYTES
from seed_agents.protocol.wire.framing_http import HttpFraming
from seed_agents.protocol.wire.framing_types import Refusal, Request, Unsubscribe
from seed_agents.protocol.wire.framing_v1 import V1Framing
from seed_agents.protocol.wire.framing_v2 import V2Framing
from seed_agents.protocol.wire.wire_values import RawEvents

from tests.wsraw import keypair

KP = keypair("framings")


def test_v1_reads_binary_and_byte_array_text_alike():
    v1 = V1Framing(1 << 20)
    frame = sign_envelope(KP, {"_": "ListAgents"})
    assert v1.read(frame) == Request(None, frame)
    assert v1.read(json.dumps(list(frame))) == Request(None, frame)
    for text in ("hello", "[256]", "[-1]", "[1.0]", "[true]", "{}"):
        refusal = v1.read(text)
        assert type(refusal) is Refusal and refusal.value["status"] == 400, text
    assert v1.read(b"x" * ((1 << 20) + 1)).value["status"] == 413


def test_v1_answers_json_text_and_a_failed_subscribe_as_the_error_event():
    v1 = V1Framing(1 << 20)
    sub = Request(None, sign_envelope(KP, {"_": "Subscribe", "key": "sessions/x"}))
    err = {"_": "Error", "status": 404, "message": "no such session"}
    assert type(v1.reply(sub, err, None)) is str   # a text message
    assert json.loads(v1.reply(sub, err, None)) == {"_": "error", "message": "no such session",
                                                             "status": 404}
    other = Request(None, sign_envelope(KP, {"_": "ListAgents"}))
    assert json.loads(v1.reply(other, err, None)) == err
    assert json.loads(v1.event({"_": "change", "key": "k", "value": {"b": b"\x01"}})) == \
        {"_": "change", "key": "k", "value": {"b": {"/": {"bytes": "AQ"}}}}
    assert v1.replayed("k", 3) is None


def test_v2_reads_requests_and_controls_and_answers_by_id():
    v2 = V2Framing(1 << 20, 64)
    env = sign_envelope(KP, {"_": "ListAgents"})
    read = v2.read(dagcbor.encode({"id": 7, "envelope": dagcbor.decode(env)}))
    assert read == Request(7, env)
    assert v2.read(dagcbor.encode({"id": 8, "_": "Unsubscribe", "key": "k"})) == Unsubscribe(8, "k")
    assert v2.read("text").id is None
    answer = v2.reply(read, {"_": "ListAgentsResponse", "agents": RawEvents([])}, "ListAgents")
    assert type(answer) is bytes and dagcbor.decode(answer) == {
        "id": 7, "response": {"_": "ListAgentsResponse", "agents": []}}
    body = dagcbor.encode({"seq": 1})
    spliced = v2.event({"_": "append", "key": "sessions/s", "event": None}, body)
    assert dagcbor.decode(spliced) == {"_": "append", "key": "sessions/s", "event": {"seq": 1}}
    (frame, seq), = v2.replay("sessions/s", [(1, body), (2, dagcbor.encode({"seq": 2}))])
    assert seq == 2 and dagcbor.decode(frame)["events"] == [{"seq": 1}, {"seq": 2}]


def test_an_http_answer_in_pieces_is_the_answer_in_one_piece_and_keeps_the_events_uncopied():
    h = HttpFraming(max_frame=1000, max_depth=64)
    bodies = [dagcbor.encode({"seq": i, "text": "x" * 1000}) for i in range(3)]
    value = {"_": "GetSessionResponse", "session": {"id": "s"}, "events": RawEvents(bodies), "more": False}
    pieces = h.response_pieces(value, keep_alive=True)
    assert b"".join(pieces) == h.response(value, keep_alive=True)
    assert all(any(p is b for p in pieces) for b in bodies)   # the stored bytes themselves
    assert pieces[0].startswith(b"HTTP/1.1 200 OK\r\n") and pieces[0].endswith(b"\r\n\r\n")
    error = {"_": "Error", "status": 404, "message": "no"}
    assert b"".join(h.response_pieces(error, keep_alive=False)) == h.response(error, keep_alive=False)


def test_http_routes_head_checks_and_answers():
    h = HttpFraming(max_frame=1000, max_depth=64)
    assert h.route("POST", "/api/message?x=1").kind == "message"
    assert h.route("POST", "/agents/api/message").kind == "message"
    assert h.route("GET", "/api/message").kind == "bad_method"
    assert h.route("OPTIONS", "/agents/api/health").kind == "preflight"
    assert h.route("GET", "/agents/api/version").kind == "version"
    assert h.route("GET", "/agents/ws").kind == "ws"
    assert h.route("GET", "/elsewhere").kind == "not_found"
    assert h.check_head("application/cbor; charset=binary", 10) is None
    assert h.check_head("application/json", 10).value["status"] == 415
    assert h.check_head(None, None).value["status"] == 415
    # the head allows an upload chunk's frame (protocol/wire/frame_limits.py); the body's own action
    # decides the rest (`read`): past the limit, only an upload action is read
    assert h.check_head("application/cbor", UPLOAD_FRAME_BYTES + 1).value["status"] == 413
    assert h.read(sign_envelope(KP, {"_": "SetSecret", "name": "s", "value": b"v" * 1000})).value["status"] == 413
    big_chunk = sign_envelope(KP, {"_": "AppendFileUploadChunk", "uploadId": "u", "offset": 0, "content": b"v" * 5000})
    assert h.read(big_chunk) == Request(None, big_chunk)
    sub = sign_envelope(KP, {"_": "Subscribe", "key": "sessions/x"})
    assert h.read(sub).value["status"] == 400
    assert h.read(b"\xff") == Request(None, b"\xff")   # the pipeline says what is wrong with it
    answer = h.response({"_": "Error", "status": 409, "message": "replay"})
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 409 Conflict\r\n") and b"Access-Control-Allow-Origin: *" in head
    assert dagcbor.decode(body)["status"] == 409
    assert h.response({"_": "ListAgentsResponse", "agents": []}).startswith(b"HTTP/1.1 200 OK\r\n")

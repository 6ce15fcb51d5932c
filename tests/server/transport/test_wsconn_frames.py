"""What a WebSocket keeps of a frame once it is answered: nothing. An upload chunk is megabytes,
and a socket that kept its last one would hold it beside the next it receives (the server's RSS
under concurrent uploads, docs/operations.md "Files"). Real server, real socket.
"""
from __future__ import annotations

import gc

from seed_agents.clients import actions
from seed_agents.clients.raw import RawV2, signed_request_frame, unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.protocol.wire.keys import Keypair

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}
MiB = 1 << 20


def holders_of_bytes(length: int) -> list[str]:
    """The types of every object (gc-tracked) that refers to a bytes object of `length` bytes."""
    found = []
    for obj in gc.get_objects():
        for ref in gc.get_referents(obj):
            if type(ref) is bytes and len(ref) == length:
                found.append(type(obj).__qualname__)
    return found


async def test_an_answered_upload_chunk_frame_is_held_by_nothing(server):
    kp = Keypair.generate()
    sock = await RawV2.open(server.url, decode=True)
    try:
        agent = (await sock.call(kp, {"_": "CreateAgent", "definition": ECHO}))["agentId"]
        size = 3 * MiB + 1   # an upload-sized frame (over the ordinary frame limit), of a length no other object has
        begin = await sock.call(kp, actions.begin_file_upload({"kind": "memory", "agentId": agent, "path": "f"},
                                                              2 * size))
        envelope = sign_envelope(kp, actions.append_file_upload_chunk(begin["uploadId"], 0, b"x" * size),
                                 ts=unique_ts())
        frame_length = len(signed_request_frame(1, envelope))
        answer = await sock.request(envelope, req_id=1)
        assert answer.get("received") == size, answer
        del envelope
        # The server took the frame's payload (frame_length bytes, unmasked) as one bytes object:
        # once answered, no object of the server (its socket, the WebSocket parser) refers to it.
        assert holders_of_bytes(frame_length) == []
        # and the socket still reads the next chunk
        answer = await sock.call(kp, actions.append_file_upload_chunk(begin["uploadId"], size, b"y" * size))
        assert answer.get("received") == 2 * size, answer
    finally:
        await sock.close()

"""server/transport/wsconn.py is the one module that uses websockets' internals (it copies
`Connection.send_data`, writes prebuilt frames behind the protocol's back, replaces the
Assembler's frame queue and hooks the flow-control callbacks). pyproject.toml pins websockets to
the minor version this was written against; this test fails when the code of that version
wsconn.py relies on changes, so an upgrade is a deliberate review, not a silent breakage.

After reviewing server/transport/wsconn.py against the new websockets, update the digests below
(`python -m tests.server.transport.test_wsconn_fence` prints them)."""
from __future__ import annotations

import hashlib
import inspect

import websockets
from websockets.asyncio.connection import Connection
from websockets.asyncio.messages import Assembler, SimpleQueue
from websockets.asyncio.server import ServerConnection
from websockets.protocol import Protocol

WRITTEN_AGAINST = "17.4"

DEPENDS_ON = {
    "Connection.send_data": Connection.send_data,            # copied into wsconn.send_data
    "Connection.connection_made": Connection.connection_made,  # its Assembler is replaced
    "Connection.connection_lost": Connection.connection_lost,
    "Connection.pause_writing": Connection.pause_writing,      # hooked: reading pauses too
    "Connection.resume_writing": Connection.resume_writing,
    "Connection.drain": Connection.drain,
    "Connection.send_context": Connection.send_context,
    "ServerConnection.connection_made": ServerConnection.connection_made,
    "Assembler.__init__": Assembler.__init__,                # subclassed: bounded in bytes
    "Assembler.get": Assembler.get,
    "Assembler.put": Assembler.put,
    "Assembler.maybe_pause": Assembler.maybe_pause,
    "Assembler.maybe_resume": Assembler.maybe_resume,
    "SimpleQueue.put": SimpleQueue.put,                      # subclassed: counts bytes
    "SimpleQueue.get": SimpleQueue.get,
    "SimpleQueue.put_back": SimpleQueue.put_back,
    "Protocol.data_to_send": Protocol.data_to_send,          # prebuilt frames bypass it
}

DIGESTS = {
    "Connection.send_data": "b01f84358ffee740",
    "Connection.connection_made": "5a10b9a989143201",
    "Connection.connection_lost": "ed34a9b75ab37cf2",
    "Connection.pause_writing": "2be970c6448a731b",
    "Connection.resume_writing": "3b97076b60f807da",
    "Connection.drain": "42a1ae01f9bf2907",
    "Connection.send_context": "3dbc998ac51e6845",
    "ServerConnection.connection_made": "0d0a81e21d71bec6",
    "Assembler.__init__": "9130f18dec08a23d",
    "Assembler.get": "2db634a947dcad5f",
    "Assembler.put": "0d37a23122341324",
    "Assembler.maybe_pause": "b3b5da6cb48ea436",
    "Assembler.maybe_resume": "ea1fd7a305dd127a",
    "SimpleQueue.put": "80349d4a77a414be",
    "SimpleQueue.get": "6603528ea8fe7933",
    "SimpleQueue.put_back": "8b8a04a57b98b06c",
    "Protocol.data_to_send": "959589a5e74ef26f",
}


def digests() -> dict[str, str]:
    return {name: hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]
            for name, fn in DEPENDS_ON.items()}


def test_the_websockets_code_wsconn_relies_on_is_the_code_it_was_written_against():
    changed = sorted(name for name, digest in digests().items() if DIGESTS[name] != digest)
    assert not changed, (
        f"websockets {websockets.version.version} (wsconn.py was written against {WRITTEN_AGAINST}) "
        f"changed {', '.join(changed)}: review server/transport/wsconn.py against it, then update DIGESTS")


def test_websockets_is_pinned_to_that_minor_version():
    major_minor = ".".join(WRITTEN_AGAINST.split(".")[:2])
    assert websockets.version.version.startswith(major_minor + ".") or \
        websockets.version.version == major_minor


if __name__ == "__main__":
    for name, digest in digests().items():
        print(f'    "{name}": "{digest}",')

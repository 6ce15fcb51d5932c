"""Coverage-guided fuzz target for the decode-verify-dispatch path (optional; needs atheris).

    .venv/bin/python tests/fuzz/fuzz_dispatch.py -atheris_runs=200000 [corpus_dir ...]

Each input is one frame: a v1 binary envelope, or (first byte odd) the decoded value handed over
the way v2 does. It goes through `seed_agents.server.verification.dispatch.execute` of a started in-process app with a
fresh connection, exactly as tests/hostile/test_hardening_fuzz.py does under hypothesis; any exception,
any answer that is not a response or an Error with a contract status, or any error logged by the
server stops the run. The server clock is frozen at the time of tests/vectors/envelopes.json,
so seed the corpus with those frames: `tests/fuzz/fuzz_dispatch.py --write-seeds DIR` writes them
(as v1 and as v2 inputs) into DIR. Without atheris the same target runs once over the files and directories
given (a corpus replay), and over the reference vectors when none are given.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SEED_AGENTS_SECRETS_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")

CONTRACT_ERRORS = {400, 401, 403, 404, 409, 413, 429}
MAX_MESSAGE = 1000   # an error message never echoes a client value at length (issue 12, finding 6)


class _FailOnError(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        raise AssertionError(f"server logged an error: {record.name}: {record.getMessage()}")


class _NoSocket:
    subprotocol = None
    remote_address = ("127.0.0.1", 0)


class Target:
    def __init__(self) -> None:
        from seed_agents.protocol.wire import dagcbor
        from seed_agents.server.app import App
        from seed_agents.server.transport.connection import Connection
        from seed_agents.server.verification.dispatch import execute

        from tests.conftest import make_config

        self.dagcbor, self.Connection, self.execute = dagcbor, Connection, execute
        self.tmp = tempfile.TemporaryDirectory(prefix="fuzz-dispatch-")
        self.loop = asyncio.new_event_loop()
        self.app = App(make_config(Path(self.tmp.name), rate_per_second=1e9, rate_burst=10**9,
                                   sockets_per_account=10**9))
        self.loop.run_until_complete(self.app.start())
        # The server clock is frozen at the reference vectors' time, so they (and mutations
        # that keep their signature) pass the clock check and reach the handlers.
        from tests.vectors import load

        ts = sorted(c["action"]["ts"] for c in load("envelopes")["cases"]
                    if type(c["action"].get("ts")) is int)
        self.app.now_ms = lambda: ts[len(ts) // 2]
        # As if the server had started just before the vectors were signed: otherwise the start
        # rule (server/verification/replay_guard.py) would refuse every vector read as older than the start.
        self.app.guard.started_ms = ts[0] - 1
        handler = _FailOnError(level=logging.ERROR)
        logging.getLogger("seed_agents").addHandler(handler)
        from seed_agents.protocol.wire.framing_v1 import dumps as json_dumps
        from seed_agents.protocol.wire.wire_values import encode_value

        self.json_dumps, self.encode_value = json_dumps, encode_value

    def one(self, data: bytes) -> None:
        envelope: object = data[1:]
        if data[:1] and data[0] & 1:
            try:
                envelope = self.dagcbor.decode(data[1:])
            except self.dagcbor.DagCborError:
                pass
        conn = self.Connection(self.app, _NoSocket())
        outcome = self.loop.run_until_complete(self.execute(self.app, conn, envelope))
        response = outcome.response
        if response.get("_") == "Error":
            assert response["status"] in CONTRACT_ERRORS, response
            assert len(response["message"]) <= MAX_MESSAGE, response["message"][:300]
        else:
            assert str(response.get("_", "")).endswith("Response"), response
        self.json_dumps(response)
        self.encode_value(response)

    def close(self) -> None:
        self.loop.run_until_complete(self.app.stop())
        self.loop.close()
        self.tmp.cleanup()


def _inputs(paths: list[str]):
    if not paths:
        from tests.vectors import load

        for case in load("envelopes")["cases"]:
            frame = bytes.fromhex(case["envelopeHex"])
            yield b"\x00" + frame
            yield b"\x01" + frame
        yield from _extreme_inputs()
        return
    for p in map(Path, paths):
        for f in ([p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())):
            yield f.read_bytes()


def _extreme_inputs():
    """Actions with integer extremes and huge values, signed by a vector key at the frozen
    time (issue 12, findings 6 and 7): seeds for the mutations to start from."""
    from seed_agents.protocol.wire.envelope import sign_envelope
    from seed_agents.protocol.wire.keys import Keypair

    from tests.vectors import load

    vectors = load("envelopes")
    kp = Keypair.from_seed(bytes.fromhex(next(iter(vectors["keys"].values()))["seedHex"]))
    ts = sorted(c["action"]["ts"] for c in vectors["cases"] if type(c["action"].get("ts")) is int)
    now = ts[len(ts) // 2]
    big = '\x00"\\' * 50_000
    actions = []
    for n in (2**53 - 1, 2**53, 2**63, 2**64 - 1, -1, -(2**64)):
        actions += [{"_": "GetSession", "sessionId": "s", "afterSeq": n},
                    {"_": "Subscribe", "key": "sessions/s", "afterSeq": n},
                    {"_": "ListSessions", "limit": n}]
    actions += [{"_": big}, {"_": "MessageSession", "sessionId": "s", "content": [{"type": big}]},
                {"_": "ListSessions", "cursor": big}, {"_": "Subscribe", "key": big}]
    for action in actions:
        frame = sign_envelope(kp, action, ts=now)
        yield b"\x00" + frame
        yield b"\x01" + frame


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(_inputs([])):
            (out / f"vector-{i:03d}").write_bytes(data)
        return 0
    target = Target()
    try:
        import atheris  # noqa: F401
    except ImportError:
        n = 0
        for data in _inputs([a for a in sys.argv[1:] if not a.startswith("-")]):
            target.one(data)
            n += 1
        print(f"atheris is not installed: replayed {n} inputs through the target, all answered")
        target.close()
        return 0
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, target.one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())

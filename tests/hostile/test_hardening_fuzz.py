"""Fuzzing the real decode-verify-dispatch path with arbitrary and mutated frames.

Sources: arbitrary bytes; the reference envelopes of tests/vectors/envelopes.json (verified
against a server clock set to their time); fresh envelopes signed now, whose actions carry
arbitrary values in the fields the handlers read (so many pass the signature and reach the
handlers, some with ids of real agents and sessions); and structural edits of an envelope
re-encoded loosely with cbor2 (undefined, other tags, NaN, short floats, unsorted keys).
Each source is then mutated at the byte level (flips, cuts, splices, insertions).

Two ways:
- in-process, straight into `seed_agents.server.verification.dispatch.execute(app, conn, frame)` (bytes as v1 hands
  them over, or the decoded value as v2 does): thousands of cases; every answer is a success
  response or an Error with a contract status (never 500), and the server logs no error;
- over a real socket in both framings, a few hundred frames each: the socket stays open and
  each frame gets exactly one answer.

`test_fuzz_dispatch_in_process[long]` (marked slow, run by `make stress`) is the long in-process run;
HARDENING_FUZZ_EXAMPLES overrides its case count.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import time

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from seed_agents.clients.raw import signed_request_frame
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.api.actions import ACTIONS
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.protocol.wire.framing_v1 import dumps as json_dumps
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.wire.wire_values import encode_value
from seed_agents.server.app import App
from seed_agents.server.main import start_server
from seed_agents.server.transport.connection import Connection
from seed_agents.server.verification.dispatch import execute

from tests.conftest import make_config
from tests.vectors import load
from tests.waiting import until
from tests.wsraw import V2, keypair

CONTRACT_ERRORS = {400, 401, 403, 404, 409, 413, 429}
FAST_EXAMPLES = 3_000   # the long run (make stress) takes 60,000
SOCKET_EXAMPLES = 400
LONG_EXAMPLES = int(os.environ.get("HARDENING_FUZZ_EXAMPLES", "60000"))

A, B = keypair("fuzz-A"), keypair("fuzz-B")
ENVELOPES = load("envelopes")
VECTOR_FRAMES = [bytes.fromhex(c["envelopeHex"]) for c in ENVELOPES["cases"]]
# without the Subscribe cases: on a socket a v1 subscription would add event frames to the answers
VECTOR_FRAMES_NO_SUBSCRIBE = [bytes.fromhex(c["envelopeHex"]) for c in ENVELOPES["cases"]
                              if c["action"].get("_") != "Subscribe"]
VECTOR_KEYS = [Keypair.from_seed(bytes.fromhex(k["seedHex"])) for k in ENVELOPES["keys"].values()]
_vector_ts = sorted(c["action"]["ts"] for c in ENVELOPES["cases"] if type(c["action"].get("ts")) is int)
VECTOR_NOW = _vector_ts[len(_vector_ts) // 2]   # a server clock at which the vectors are fresh

LIMITS = dict(rate_per_second=1e9, rate_burst=10**9, sockets_per_account=10**9, unverified_burst=10**9)


# -- values and actions ----------------------------------------------------------------------

text = st.text(max_size=24)
leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1)
          | st.floats(allow_nan=False, allow_infinity=False) | text | st.binary(max_size=24))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(text, inner, max_size=4), max_leaves=12)
# what cbor2 writes but DAG-CBOR refuses (or only tolerates)
exotic = st.sampled_from([cbor2.undefined, cbor2.CBORTag(1, 0), cbor2.CBORTag(42, b"\x00\x01q"),
                          cbor2.CBORTag(42, "not bytes"), cbor2.CBORSimpleValue(99), float("nan"),
                          float("-inf"), 1.5, -0.0, 2**64 + 1, -(2**64) - 1, b"\x00" * 64])

# Integer extremes (finding 7 of issue 12): the edges of the safe range, of SQLite's int64 and of
# CBOR's 64-bit heads; 2^64 and -2^64 - 1 are not CBOR at all (the envelope then goes loosely
# encoded, as a bignum tag, and is refused at decode).
extremes = st.sampled_from([2**53 - 1, 2**53, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1, -(2**53),
                            -(2**63), -(2**63) - 1, -(2**64), -(2**64) - 1])
# Huge values (finding 6): escape-heavy text and bytes of up to 300 KB, which an error message
# must never echo (check_answer bounds every message).
huge = st.builds(lambda unit, n, as_bytes: (unit * n).encode() if as_bytes else unit * n,
                 st.sampled_from(["\x00", '"', "\\", "\u2028", "é", "a"]),
                 st.integers(2_000, 300_000), st.booleans())
MAX_MESSAGE = 1000   # characters in any error message
# ListSessions cursors as the server makes them ("<updatedAt>:<id>", base64url), any integer
crafted_cursors = st.builds(
    lambda n: base64.urlsafe_b64encode(f"{n}:x".encode()).decode().rstrip("="),
    extremes | st.integers(0, 2**53 - 1))

LOOPBACK_URLS = ["http://127.0.0.1:9/v1", "https://127.0.0.1:9", "ftp://127.0.0.1/x", "no url", ""]
PROVIDER_NAMES = ["echo", "p1", "p2"]


def provider_maps():
    # Never a provider that would call a public address: the OpenAI-compatible types always get a
    # loopback base URL (port 9, refused at once); echo, ollama (localhost) and refused ones vary.
    hosted = st.fixed_dictionaries({
        "type": st.sampled_from(["openai", "openrouter", "deepseek", "groq", "xai", "custom"]),
        "baseUrl": st.sampled_from(LOOPBACK_URLS[:2])}, optional={
        "secretRefs": st.dictionaries(st.sampled_from(["apiKey", "other"]), values, max_size=2),
        "modelDefaults": values})
    other = st.fixed_dictionaries({
        "type": st.sampled_from(["echo", "ollama", "anthropic", "google", "bogus"]) | values}, optional={
        "baseUrl": st.sampled_from(LOOPBACK_URLS) | st.integers()})
    return hosted | other | values


def content_parts():
    part = (st.fixed_dictionaries({"type": st.just("text"), "text": text | values},
                                  optional={"clientMessageId": text})
            | st.fixed_dictionaries({"type": st.just("context"), "lines": st.lists(text, max_size=3) | values})
            | values)
    return st.lists(part, max_size=4) | values


def field_values(ids: list[str]):
    some_id = st.sampled_from(ids) | text | values | huge
    return {
        "agentId": some_id, "sessionId": some_id,
        "key": st.sampled_from([f"{k}/{i}" for k in ("sessions", "agents", "runs", "account")
                                for i in ids + [A.account_id, B.account_id]]) | text | values,
        "title": text | values | huge, "content": content_parts() | st.builds(
            lambda kind: [{"type": kind, "text": "x"}], huge),
        "definition": st.fixed_dictionaries({
            "name": text | values, "systemPrompt": text | values,
            "modelProvider": st.sampled_from(PROVIDER_NAMES) | values, "model": text | values},
            optional={"metadata": values}) | values,
        "afterSeq": st.integers(-5, 2**64 - 1) | extremes | values,
        "limit": st.integers(-5, 20_000) | extremes | values,
        "cursor": text | values | huge, "name": st.sampled_from(PROVIDER_NAMES + ["s1"]) | text | values,
        "value": st.binary(max_size=64) | values, "provider": provider_maps(),
        "capability": st.binary(max_size=200) | values, "metadata": values,
        "clientRequestId": st.sampled_from(["r1", "r2"]) | text | values,
        "clientMessageId": st.sampled_from(["m1", "m2"]) | text | values,
    }


def plausible_actions(ids: list[str]):
    """Well-typed actions with free values, so many get through parse_action to the handlers."""
    some_id = st.sampled_from(ids) | text
    words = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), min_size=1, max_size=40)
    parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": words})
                     | st.fixed_dictionaries({"type": st.just("context"), "lines": st.lists(words, max_size=3)}),
                     min_size=1, max_size=3)
    definition = st.fixed_dictionaries({
        "name": words, "systemPrompt": text, "modelProvider": st.sampled_from(PROVIDER_NAMES),
        "model": words}, optional={"metadata": values})
    optional_id = st.sampled_from(["r1", "r2"]) | words
    return st.one_of(
        st.fixed_dictionaries({"_": st.just("CreateAgent"), "definition": definition},
                              optional={"clientRequestId": optional_id}),
        st.fixed_dictionaries({"_": st.just("CreateSession"), "agentId": some_id},
                              optional={"title": text, "clientRequestId": optional_id}),
        st.fixed_dictionaries({"_": st.just("MessageSession"), "sessionId": some_id, "content": parts},
                              optional={"clientMessageId": optional_id}),
        st.fixed_dictionaries({"_": st.sampled_from(["GetAgent"]), "agentId": some_id}),
        st.fixed_dictionaries({"_": st.sampled_from(["GetSession", "StopSession"]), "sessionId": some_id},
                              optional={"afterSeq": st.integers(0, 50) | extremes,
                                        "limit": st.integers(1, 10_000) | extremes}),
        st.fixed_dictionaries({"_": st.sampled_from(["ListAgents", "ListModelProviders"])}),
        st.fixed_dictionaries({"_": st.just("ListSessions")},
                              optional={"agentId": some_id, "limit": st.integers(1, 500) | extremes,
                                        "cursor": text | crafted_cursors}),
        st.fixed_dictionaries({"_": st.just("SetSecret"), "name": words, "value": st.binary(max_size=64)},
                              optional={"metadata": st.dictionaries(text, values, max_size=3)}),
        st.fixed_dictionaries({"_": st.just("SetModelProvider"), "name": st.sampled_from(PROVIDER_NAMES[1:]),
                               "provider": provider_maps()}),
        st.fixed_dictionaries({"_": st.just("Subscribe"), "key": field_values(ids)["key"]},
                              optional={"afterSeq": st.integers(0, 50) | extremes}),
        st.fixed_dictionaries({"_": st.just("RegisterSigner"), "capability": st.binary(max_size=200)}),
    )


def actions(ids: list[str]):
    return plausible_actions(ids) | free_actions(ids)


def free_actions(ids: list[str]):
    fields = field_values(ids)
    names = st.sampled_from(sorted(ACTIONS)) | text | values

    @st.composite
    def build(draw):
        action = {"_": draw(names)}
        for field in draw(st.lists(st.sampled_from(sorted(fields)), max_size=5, unique=True)):
            action[field] = draw(fields[field])
        if draw(st.integers(0, 9)) == 0:
            action[draw(text)] = draw(values)
        return action

    return build()


# -- envelopes and mutations -------------------------------------------------------------------

def loose_encode(value) -> bytes:
    """cbor2 with insertion order and whatever it can write (not DAG-CBOR on purpose)."""
    return cbor2.dumps(value)


@st.composite
def fresh_envelope(draw, action_strategy):
    signer = draw(st.sampled_from([A, B]))
    account = draw(st.sampled_from([None, None, None, A.principal, B.principal]))
    action = draw(action_strategy)
    ts_skew = draw(st.sampled_from([0, 0, 0, 0, -31_000, 31_000]))
    action = {k: v for k, v in action.items() if v is not None} if draw(st.booleans()) else action
    ts = int(time.time() * 1000) + ts_skew
    if draw(st.integers(0, 19)) == 0:
        ts = draw(extremes | huge)
    try:
        env = build_envelope(signer, action, account=account, ts=ts)
    except Exception:  # noqa: BLE001 - e.g. a value DAG-CBOR cannot encode: send it loosely
        env = {"type": "AgentsAction", "signer": signer.principal, "sig": b"\x00" * 64,
               "account": signer.principal, "action": action}
    return env


@st.composite
def structural_edit(draw, env: dict) -> bytes:
    """Re-encode an envelope map with one field changed, dropped, added, or shuffled."""
    env = dict(env)
    kind = draw(st.integers(0, 4))
    key = draw(st.sampled_from(["type", "signer", "sig", "account", "action"]))
    if kind == 0:
        env.pop(key, None)
    elif kind == 1:
        env[key] = draw(values | exotic | huge)
    elif kind == 2:
        env[draw(text)] = draw(values | exotic)
    elif kind == 3 and type(env.get("action")) is dict:
        action = dict(env["action"])
        action[draw(st.sampled_from(["ts", "_", "sessionId", "x"]))] = draw(values | exotic | extremes | huge)
        env["action"] = action
    items = list(env.items())
    if draw(st.booleans()):
        items.reverse()
    try:
        return loose_encode(dict(items))
    except Exception:  # noqa: BLE001
        return dagcbor.encode({"k": 1})


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four byte-level edits. The edits come from a Random seeded by hypothesis: drawing
    each one through hypothesis costs more than running the case."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        pos = rng.randrange(len(buf)) if buf else 0
        if op == 0 and buf:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[pos] = rng.randrange(256)
        elif op == 2:
            del buf[pos:pos + rng.randint(1, 16)]
        elif op == 3:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 4:
            del buf[pos:]
        elif op == 5 and buf:
            end = rng.randint(pos, len(buf))
            buf[pos:pos] = buf[pos:end][:64]
        elif op == 6 and buf:
            # a length/count head set to something huge, or a break/undefined byte
            buf[pos] = rng.choice([0x5B, 0x7B, 0x9B, 0xBB, 0x5F, 0x7F, 0x9F, 0xBF, 0xFF, 0xF7, 0xFB])
        elif op == 7 and len(buf) > 8:
            # swap two chunks (moves whole fields around)
            a, b = sorted(rng.sample(range(len(buf)), 2))
            n = min(rng.randint(1, 32), b - a)
            buf[a:a + n], buf[b:b + n] = buf[b:b + n], buf[a:a + n]
    return bytes(buf)


class Source:
    VECTOR = "vector"
    FRESH = "fresh"


MUTANTS = 4   # mutated copies run per generated frame


def frames(ids: list[str], *, include_subscribe: bool = True):
    """(source, frame bytes, seed): what the fuzzers send; each case also sends MUTANTS byte-level
    mutations of the frame made from `seed`."""
    action_strategy = actions(ids)   # built once: building strategies per example is slow
    vectors = VECTOR_FRAMES if include_subscribe else VECTOR_FRAMES_NO_SUBSCRIBE
    seeds = st.integers(0, 2**32)

    @st.composite
    def build(draw):
        choice = draw(st.integers(0, 9))
        if choice == 0:
            return Source.FRESH, draw(st.binary(max_size=300)), draw(seeds)
        if choice <= 2:
            return Source.VECTOR, draw(st.sampled_from(vectors)), draw(seeds)
        env = draw(fresh_envelope(action_strategy))
        if not include_subscribe and env["action"].get("_") == "Subscribe":
            env["action"] = {**env["action"], "_": "ListAgents"}   # v1 answers stay one frame each
        if choice <= 4:
            return Source.FRESH, draw(structural_edit(env)), draw(seeds)
        try:
            frame = dagcbor.encode(env)
        except Exception:  # noqa: BLE001
            frame = loose_encode(env)
        return Source.FRESH, frame, draw(seeds)

    return build()


def with_mutants(frame: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [frame] + [mutate(frame, rng) for _ in range(MUTANTS)]


# -- checks ----------------------------------------------------------------------------------

def check_answer(response: object) -> None:
    assert type(response) is dict, response
    if response.get("_") == "Error":
        assert response.get("status") in CONTRACT_ERRORS, response
        assert type(response.get("message")) is str and response["message"], response
        assert len(response["message"]) <= MAX_MESSAGE, (len(response["message"]), response["message"][:300])
        assert set(response) == {"_", "status", "message"}, response
    else:
        assert type(response.get("_")) is str and response["_"].endswith("Response"), response
    # both framings can send it
    json_dumps(response)
    encode_value(response)


def errors_logged(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.ERROR or "failed" in r.getMessage()]


class _NoSocket:
    """Stands for the WebSocket of an in-process Connection (execute never writes to it)."""
    subprotocol = None
    remote_address = ("127.0.0.1", 0)


async def runs_settled(app, timeout: float = 30.0) -> None:
    """Wait until no run is queued or running (each turn the fuzz started has ended), so that
    whatever a run would log has been logged."""
    def active(conn) -> int:
        return conn.execute("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')").fetchone()[0]

    await until(lambda: app.db.read(active) == 0, timeout, what="no queued or running run")


def run_in_process_fuzz(tmp_path, caplog, max_examples: int) -> dict:
    caplog.set_level(logging.INFO)
    loop = asyncio.new_event_loop()
    app = App(make_config(tmp_path, **LIMITS))
    counts = {"cases": 0, "ok": 0}
    real_now = app.now_ms
    try:
        loop.run_until_complete(app.start())
        # As if started before the vectors were signed, or the start rule of the replay guard
        # would refuse every vector read (the clock switches between VECTOR_NOW and real time).
        app.guard.started_ms = VECTOR_NOW - app.config.clock_window_ms - 1

        async def setup() -> list[str]:
            conn = Connection(app, _NoSocket())
            ids = []
            r = (await execute(app, conn, dagcbor.encode(build_envelope(A, {
                "_": "CreateAgent", "definition": {"name": "f", "systemPrompt": "",
                                                   "modelProvider": "echo", "model": "m"}})))).response
            ids.append(r["agentId"])
            r = (await execute(app, conn, dagcbor.encode(build_envelope(A, {
                "_": "CreateSession", "agentId": ids[0]})))).response
            ids.append(r["sessionId"])
            return ids

        ids = loop.run_until_complete(setup())

        async def one(source: str, frame: bytes, seed: int, as_value: bool) -> None:
            app.now_ms = (lambda: VECTOR_NOW) if source == Source.VECTOR else real_now
            for data in with_mutants(frame, seed):
                conn = Connection(app, _NoSocket())
                envelope: object = data
                if as_value:   # v2 hands execute the decoded `envelope` value, whatever it is
                    try:
                        envelope = dagcbor.decode(data)
                    except dagcbor.DagCborError:
                        pass
                outcome = await execute(app, conn, envelope)
                check_answer(outcome.response)
                counts["cases"] += 1
                status = outcome.response.get("status", 200)
                counts[status] = counts.get(status, 0) + 1
                counts["ok"] += outcome.response.get("_") != "Error"
            if counts["cases"] % 500 < MUTANTS + 1:
                await asyncio.sleep(0.01)   # let queued runs and writes progress

        @settings(max_examples=max_examples // (MUTANTS + 1), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(frames(ids), st.booleans())
        def case(source_frame, as_value):
            loop.run_until_complete(one(*source_frame, as_value))

        case()
        app.now_ms = real_now
        loop.run_until_complete(runs_settled(app))
        assert errors_logged(caplog) == []
        return counts
    finally:
        app.now_ms = real_now
        loop.run_until_complete(app.stop())
        loop.close()


@pytest.mark.parametrize("examples", [
    pytest.param(FAST_EXAMPLES, id="fast"),
    pytest.param(LONG_EXAMPLES, id="long", marks=[pytest.mark.slow, pytest.mark.timeout(3600)]),
])
def test_fuzz_dispatch_in_process(tmp_path, caplog, examples):
    started = time.monotonic()
    counts = run_in_process_fuzz(tmp_path, caplog, examples)
    print(f"\nin-process fuzz: {counts['cases']} cases, {counts['ok']} successes, "
          f"{time.monotonic() - started:.1f} s; by status {sorted((k, v) for k, v in counts.items() if type(k) is int)}")
    assert counts["cases"] >= examples // 2
    assert counts["ok"] > 0   # some cases got all the way through a handler


# -- over a real socket ------------------------------------------------------------------------

def run_socket_fuzz(tmp_path, caplog, framing: str, max_examples: int) -> int:
    caplog.set_level(logging.INFO)
    loop = asyncio.new_event_loop()
    state: dict = {}
    try:
        async def setup():
            srv = await start_server(make_config(tmp_path, **LIMITS))
            srv.app.guard.started_ms = VECTOR_NOW - srv.app.config.clock_window_ms - 1  # see above
            state["srv"] = srv
            kw = {"subprotocols": [V2]} if framing == "v2" else {}
            ws = await connect(srv.url, max_size=None, **kw)
            if framing == "v1":
                assert json.loads(await ws.recv())["_"] == "connected"
            state["ws"] = ws
            ids = []
            for action in ({"_": "CreateAgent", "definition": {"name": "f", "systemPrompt": "",
                                                              "modelProvider": "echo", "model": "m"}},
                           None):
                if action is None:
                    action = {"_": "CreateSession", "agentId": ids[0]}
                await ws.send(dagcbor.encode(build_envelope(A, action)) if framing == "v1" else
                              dagcbor.encode({"id": 0, "envelope": build_envelope(A, action)}))
                raw = await ws.recv()
                r = json.loads(raw) if framing == "v1" else dagcbor.decode(raw)["response"]
                ids.append(r.get("agentId") or r.get("sessionId"))
            return ids

        ids = loop.run_until_complete(setup())
        srv, ws = state["srv"], state["ws"]
        real_now = srv.app.now_ms
        counter = {"n": 0, "id": 1}

        async def one(source: str, frame: bytes, seed: int, whole: int) -> None:
            srv.app.now_ms = (lambda: VECTOR_NOW) if source == Source.VECTOR else real_now
            for i, data in enumerate(with_mutants(frame, seed)):
                await send_one(data, framing == "v2" and (whole + i) % 5 == 0)

        async def send_one(frame: bytes, whole_frame: bool) -> None:
            if framing == "v1":
                await ws.send(frame)
                answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if answer.get("_") == "error":   # v1's shape for a failed Subscribe
                    answer = {**answer, "_": "Error"}
                check_answer(answer)
            else:
                req_id = counter["id"]
                counter["id"] += 1
                data = frame if whole_frame else signed_request_frame(req_id, frame)   # broken bytes too
                await ws.send(data)
                answer = dagcbor.decode(await asyncio.wait_for(ws.recv(), 10))
                if "response" in answer:
                    assert set(answer) == {"id", "response"}, answer
                    if not whole_frame:
                        assert answer["id"] == req_id
                    check_answer(answer["response"])
                else:   # a frame with no usable id: the id-less error event
                    assert answer.get("_") == "error" and answer.get("status") in CONTRACT_ERRORS, answer
            counter["n"] += 1

        @settings(max_examples=max_examples // (MUTANTS + 1), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(frames(ids, include_subscribe=False), st.integers(0, 4))
        def case(source_frame, whole):
            loop.run_until_complete(one(*source_frame, whole))

        case()
        srv.app.now_ms = real_now

        async def finish():
            # no frame got a second answer: the next answer is this sentinel's own
            if framing == "v1":
                await ws.send(dagcbor.encode(build_envelope(A, {"_": "ListAgents", "end": 1})))
                last = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert last["_"] == "ListAgentsResponse", last
            else:
                await ws.send(dagcbor.encode({"id": 10**9, "envelope": build_envelope(A, {"_": "ListAgents"})}))
                last = dagcbor.decode(await asyncio.wait_for(ws.recv(), 10))
                assert last["id"] == 10**9 and last["response"]["_"] == "ListAgentsResponse", last
            assert ws.close_code is None   # still open
            await runs_settled(srv.app)
            await ws.close()

        loop.run_until_complete(finish())
        assert errors_logged(caplog) == []
        return counter["n"]
    finally:
        if "srv" in state:
            loop.run_until_complete(state["srv"].stop())
        loop.close()


@pytest.mark.parametrize("framing", ["v1", "v2"])
def test_fuzz_over_a_socket(tmp_path, caplog, framing):
    n = run_socket_fuzz(tmp_path, caplog, framing, SOCKET_EXAMPLES)
    assert n >= SOCKET_EXAMPLES // 2

"""What a load process needs besides the raw client (seed_agents.clients.raw): deterministic keys, a socket
whose setup calls fail loudly, fast byte checks on event frames, and a closed-loop driver."""
from __future__ import annotations

import asyncio
import hashlib
import time

from seed_agents.clients.raw import RawV2, response_id
from seed_agents.clients.wire import decode_frame as decode
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.keys import Keypair


class LoadError(RuntimeError):
    pass


def keypair(label: str) -> Keypair:
    return Keypair.from_seed(hashlib.sha256(f"bench:{label}".encode()).digest())


class Rpc(RawV2):
    """A raw v2 socket (raw frames, nothing decoded) whose `call` raises on an Error: a
    benchmark's setup must not go on after a refused step."""

    async def call(self, kp, action: dict, *, timeout: float = 30.0, **kw) -> dict:
        response = await super().call(kp, action, timeout=timeout, **kw)
        if response.get("_") == "Error":
            raise LoadError(f"{action['_']}: {response.get('status')} {response.get('message')}")
        return response


# Byte checks on a frame, cheaper than decoding it (a load process must keep up with the
# server): a canonical event map's first key is `_`, so `{_: "append", ...}` starts with these
# bytes right after the map's head.
_APPEND = dagcbor.encode({"_": "append"})[1:]
_REPLAYED = dagcbor.encode({"_": "replayed"})[1:]
_ASSISTANT = dagcbor.encode("assistant")
_ERROR_EVENT = dagcbor.encode({"type": "error"})[1:]
_EVENTS_KEY = dagcbor.encode("events")


def is_append(frame: bytes) -> bool:
    return frame.startswith(_APPEND, 1)


def is_replayed(frame: bytes) -> bool:
    return frame.startswith(_REPLAYED, 1)


def is_error_event(frame: bytes) -> bool:
    """A durable `{type: "error"}` SessionEvent is in the frame."""
    return _ERROR_EVENT in frame


def is_assistant_append(frame: bytes) -> bool:
    """A durable assistant reply (or a durable error event) for a session."""
    return frame.startswith(_APPEND, 1) and (_ASSISTANT in frame or _ERROR_EVENT in frame)


def is_error_response(frame: bytes) -> bool:
    rid = response_id(frame)
    return rid is not None and rid[1]


def appended_count(frame: bytes) -> int:
    """How many events an `append` frame carries: the length of its `events` array (a replay
    batch), else one. Reads the array's head only."""
    i = frame.find(_EVENTS_KEY, 9)
    if i < 0:
        return 1
    pos = i + len(_EVENTS_KEY)
    info = frame[pos] & 0x1F
    if info < 24:
        return info
    width = {24: 1, 25: 2, 26: 4, 27: 8}[info]
    return int.from_bytes(frame[pos + 1:pos + 1 + width], "big")


async def closed_loop(sockets: list[Rpc], frames: list[bytes], concurrency: int,
                      timeout: float = 60.0) -> dict:
    """Send every frame, keeping `concurrency` requests outstanding spread over the sockets;
    returns {seconds, latencies (s), errors, first_error}."""
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None
    it = iter(frames)
    deadline = time.perf_counter() + timeout

    async def worker(sock: Rpc) -> None:
        nonlocal errors, first_error
        for env in it:
            if time.perf_counter() > deadline:
                return
            t0 = time.perf_counter()
            frame = await sock.request(env, timeout=timeout)
            latencies.append(time.perf_counter() - t0)
            rid = response_id(frame)
            if rid is None or rid[1]:
                errors += 1
                if first_error is None:
                    first_error = repr(decode(frame).get("response"))[:300]

    started = time.perf_counter()
    await asyncio.gather(*(worker(sockets[i % len(sockets)]) for i in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "latencies": latencies, "errors": errors, "first_error": first_error}

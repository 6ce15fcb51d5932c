"""Attackers in their own process, so their work does not slow the honest client measured in
the test's process: `python -m tests.hostile_attack KIND PORT SECONDS [COUNT]` runs COUNT
attackers of one kind for SECONDS against 127.0.0.1:PORT and prints one JSON line of what they
saw. Kinds (issue 27's findings): `unread` (answers never read), `bombs` (decode bombs, junk and
signed), `pipeline` (pipelined probe floods), `header` (a header that never ends), `together`
(one of each of those four)."""
from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope

from tests.hostile_measure import dropped
from tests.httpraw import request
from tests.wsraw import keypair

CBOR = {"Content-Type": "application/cbor"}
MAPS = 1_000_000


def bomb(kp, *, junk_signature: bool) -> bytes:
    """A ListAgents envelope whose action holds a million empty maps, spliced in as bytes."""
    frame = sign_envelope(kp, {"_": "ListAgents", "junk": []}, ts=unique_ts())
    at = frame.index(b"\x64junk\x80") + 5
    frame = frame[:at] + b"\x9a" + MAPS.to_bytes(4, "big") + b"\xa0" * MAPS + frame[at + 1:]
    if junk_signature:
        return frame[:7] + bytes(range(64)) + frame[71:]
    # Re-signed: in the canonical layout these bytes, sig zeroed, are the signing input.
    return frame[:7] + kp.sign(frame[:7] + bytes(64) + frame[71:]) + frame[71:]


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return int(lines[0].split()[1]), await reader.readexactly(length)


async def bombs(port: int, stop: float, n: int, seen: dict) -> None:
    """Bomb after bomb on a keep-alive connection; a new one when the server closes it."""
    frame = request("POST", "/api/message", bomb(keypair(f"bomber {n}"), junk_signature=n % 2 == 0), CBOR)
    while time.monotonic() < stop:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.monotonic() < stop:
                writer.write(frame)
                await writer.drain()
                status, _body = await asyncio.wait_for(_response(reader), 30)
                seen[status] = seen.get(status, 0) + 1
                if status == 429:
                    break   # refused before its body: the server closes
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def unread(port: int, stop: float, n: int, seen: dict, session: str = "") -> None:
    """POST a GetSession of `session` (its owner's key: `unread owner`) and never read; again
    once dropped."""
    kp = keypair("unread owner")
    loop = asyncio.get_running_loop()
    while time.monotonic() < stop:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, ("127.0.0.1", port))
            body = sign_envelope(kp, {"_": "GetSession", "sessionId": session}, ts=unique_ts())
            await loop.sock_sendall(sock, request("POST", "/api/message", body, CBOR))
            seen["sent"] = seen.get("sent", 0) + 1
            if await dropped(sock, stop - time.monotonic()):
                seen["dropped"] = seen.get("dropped", 0) + 1
        except OSError:
            seen["refused"] = seen.get("refused", 0) + 1
            await asyncio.sleep(0.1)   # the attacker's pace between tries
        finally:
            sock.close()


async def pipeline(port: int, stop: float, n: int, seen: dict) -> None:
    flood = request("GET", "/metrics") * 2000 + request("GET", "/api/health") * 2000
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(flood)
            while True:
                status, _body = await asyncio.wait_for(_response(reader), 10)
                seen[status] = seen.get(status, 0) + 1
                if status != 200:
                    break
            writer.close()
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            seen["error"] = seen.get("error", 0) + 1
            await asyncio.sleep(0.05)   # the attacker's pace between tries


async def header(port: int, stop: float, n: int, seen: dict) -> None:
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Long: ")
            for _ in range(64):
                writer.write(b"a" * 1024)
                await writer.drain()
            status, _body = await asyncio.wait_for(_response(reader), 10)
            seen[status] = seen.get(status, 0) + 1
            writer.close()
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            seen["error"] = seen.get("error", 0) + 1
            await asyncio.sleep(0.05)   # the attacker's pace between tries


async def together(port: int, stop: float, n: int, seen: dict, session: str = "") -> None:
    """Findings 1 to 4 at once: one attacker of each kind (`n` numbers the group)."""
    parts = {kind: {} for kind in ("unread", "bombs", "pipeline", "header")}
    await asyncio.gather(unread(port, stop, n, parts["unread"], session), bombs(port, stop, n, parts["bombs"]),
                         pipeline(port, stop, n, parts["pipeline"]), header(port, stop, n, parts["header"]))
    for kind, counts in parts.items():
        for key, value in counts.items():
            seen[f"{kind} {key}"] = seen.get(f"{kind} {key}", 0) + value


KINDS = {"bombs": bombs, "unread": unread, "pipeline": pipeline, "header": header, "together": together}


async def main(kind: str, port: int, seconds: float, count: int, extra: list[str]) -> dict:
    stop = time.monotonic() + seconds
    seen: dict = {}
    await asyncio.gather(*(KINDS[kind](port, stop, n, seen, *extra) for n in range(count)))
    return seen


if __name__ == "__main__":
    kind, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    result = asyncio.run(main(kind, port, seconds, count, sys.argv[5:]))
    print(json.dumps({str(k): v for k, v in result.items()}), flush=True)

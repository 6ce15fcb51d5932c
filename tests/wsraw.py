"""A deliberately thin test client over raw websockets: it lets tests send exact bytes in both
framings (the library client in clients/ always signs correctly and speaks v2 only)."""
from __future__ import annotations

import asyncio
import itertools
import json

from websockets.asyncio.client import connect

from protocol import dagcbor
from protocol.envelope import sign_envelope, build_envelope
from protocol.keys import Keypair

V2 = "seed-agents.v2"


def keypair(label: str) -> Keypair:
    import hashlib

    return Keypair.from_seed(hashlib.sha256(label.encode()).digest())


class V1:
    def __init__(self, ws):
        self.ws = ws

    @classmethod
    async def open(cls, url):
        ws = await connect(url, max_size=None)
        self = cls(ws)
        hello = json.loads(await ws.recv())
        assert hello["_"] == "connected"
        return self

    async def send(self, kp, action, **kw) -> dict:
        await self.ws.send(sign_envelope(kp, action, **kw))
        return await self.recv()

    async def recv(self, timeout=10) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def close(self):
        await self.ws.close()


class V2Client:
    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.responses: dict[int, asyncio.Future] = {}
        self.events: asyncio.Queue = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url, **kw):
        ws = await connect(url, subprotocols=[V2], max_size=None, **kw)
        assert ws.subprotocol == V2
        return cls(ws)

    async def _read(self):
        try:
            async for frame in self.ws:
                value = dagcbor.decode(frame, max_size=1 << 30, max_depth=256)
                if "id" in value and "response" in value:
                    fut = self.responses.pop(value["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(value["response"])
                else:
                    await self.events.put(value)
        except Exception:  # noqa: BLE001 - the socket closed
            pass

    async def request(self, envelope, req_id=None, timeout=10) -> dict:
        req_id = next(self.ids) if req_id is None else req_id
        fut = asyncio.get_running_loop().create_future()
        self.responses[req_id] = fut
        await self.ws.send(dagcbor.encode({"id": req_id, "envelope": envelope}))
        return await asyncio.wait_for(fut, timeout)

    async def call(self, kp, action, **kw) -> dict:
        return await self.request(build_envelope(kp, action, **kw))

    async def raw(self, frame: bytes, req_id: int | None = None, timeout=10):
        if req_id is not None:
            fut = asyncio.get_running_loop().create_future()
            self.responses[req_id] = fut
            await self.ws.send(frame)
            return await asyncio.wait_for(fut, timeout)
        await self.ws.send(frame)

    async def event(self, timeout=10) -> dict:
        return await asyncio.wait_for(self.events.get(), timeout)

    async def close(self):
        self.reader.cancel()
        await self.ws.close()


async def setup_session(client, kp, title=None):
    r = await client.call(kp, {"_": "CreateAgent", "definition": {
        "name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}})
    assert r["_"] == "CreateAgentResponse", r
    agent_id = r["agentId"]
    action = {"_": "CreateSession", "agentId": agent_id}
    if title:
        action["title"] = title
    r = await client.call(kp, action)
    assert r["_"] == "CreateSessionResponse", r
    return agent_id, r["sessionId"]


def flatten(event: dict) -> list:
    """The SessionEvents an `append` carries, batched (v2 replay) or single."""
    if event.get("_") == "append":
        return event["events"] if "events" in event else [event["event"]]
    return []


def rss_bytes() -> int:
    """This process's resident memory (in-process servers share it)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0

"""The tests' raw client: the shared one (clients/raw.py, also the benchmarks' load client) in
its decoding mode, plus an event queue. It lets tests send exact bytes in both framings (the
library client in clients/ always signs correctly and speaks v2 only) and see every frame."""
from __future__ import annotations

import asyncio
import hashlib

from seed_agents.clients.raw import V1, V2, RawV2, connect, unique_ts
from seed_agents.clients.wire import decode_frame
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.protocol.wire.keys import Keypair

__all__ = ["V1", "V2", "V2Client", "keypair", "setup_session", "flatten", "rss_bytes"]


def keypair(label: str) -> Keypair:
    return Keypair.from_seed(hashlib.sha256(label.encode()).digest())


class V2Client(RawV2):
    """Decoded answers; events (and any answer nobody waited for) queue up in `events`, and
    `frames` records every frame received, in order."""

    def __init__(self, ws) -> None:
        self.events: asyncio.Queue = asyncio.Queue()
        self.frames: list[bytes] = []
        super().__init__(ws, self.events.put_nowait, decode=True, log=self.frames)

    @classmethod
    async def open(cls, url, **kw) -> "V2Client":
        return cls(await connect(url, **kw))

    async def event(self, timeout=10) -> dict:
        return await asyncio.wait_for(self.events.get(), timeout)

    async def event_where(self, pred, timeout: float = 10) -> dict:
        """The first queued event for which `pred` holds (the ones before it are dropped)."""
        async def go():
            while True:
                e = await self.events.get()
                if pred(e):
                    return e
        return await asyncio.wait_for(go(), timeout)

    async def answer_is_next_frame(self, kp: Keypair) -> None:
        """Nothing else arrives before a harmless marker request's answer: it is the next frame
        after the ones already received, and no event is waiting."""
        before = len(self.frames)
        req_id, self.next_id = self.next_id, self.next_id + 1
        r = await self.request(build_envelope(kp, {"_": "ListAgents"}, ts=unique_ts()), req_id=req_id)
        assert r["_"] == "ListAgentsResponse", r
        assert self.events.empty(), self.events.get_nowait()
        got = [decode_frame(f) for f in self.frames[before:]]
        assert got[0] == {"id": req_id, "response": r}, got


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


class Party:
    """One account on its own socket: its calls signed by its key, its events waited for."""

    def __init__(self, kp, client) -> None:
        self.kp, self.client = kp, client

    async def call(self, action: dict) -> dict:
        return await self.client.call(self.kp, action)

    async def ok(self, action: dict) -> dict:
        r = await self.call(action)
        # UpdateAgent answers GetAgentResponse, as the reference (docs/protocol.md).
        answer = "GetAgentResponse" if action["_"] == "UpdateAgent" else action["_"] + "Response"
        assert r["_"] == answer, (action, r)
        return r

    async def status(self, action: dict) -> int:
        r = await self.call(action)
        return 200 if r["_"] != "Error" else r["status"]

    async def wait_for(self, pred, timeout=10) -> dict:
        async def go():
            while True:
                e = await self.client.events.get()
                if pred(e):
                    return e
        return await asyncio.wait_for(go(), timeout)

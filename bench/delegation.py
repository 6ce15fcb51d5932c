"""Delegation's cost: a parent that fans out to 10 children and is woken by the last of them, beside
a plain turn, in one run, on the fake OpenAI-compatible provider (a separate process answering at
once).

Each fan-out is one user message: the parent's first model step calls `delegate` 10 times; the
turn parks (the children are created in that transaction); each child answers in one step; the
last child's ending wakes the parent, which answers. Measured on one socket subscribed to the
tree (`runs/<rootRunId>`, as the desktop's run card follows it):

- wake-up: from the last child's `succeeded` change to the parent's next `running` change, the
  latency a parked run adds between "the work is done" and "the parent goes on";
- fan-out turn: from the MessageSession to the parent's `succeeded`;
- plain turn: the same agent answering without tools, from MessageSession to `succeeded`.

`python -m bench.delegation [--fanouts N]` prints p50 and p99 of each as JSON.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import httpx

from seed_agents.clients.wire import decode_frame

from bench.load import Rpc, keypair
from bench.processes import FakeProvider, Server
from bench.stats import latency_figures

CHILDREN = 10


def fanout_scripts() -> list[dict]:
    delegate = {"chunks": [], "tool_calls": [
        {"id": f"d{i}", "name": "delegate", "arguments": json.dumps({"brief": f"part {i}"})} for i in range(CHILDREN)]}
    return [delegate, *({"chunks": ["child answer"]} for _ in range(CHILDREN)), {"chunks": ["all done"]}]


class Tree:
    """The run changes of the tree this socket follows, with their arrival times."""

    def __init__(self) -> None:
        self.changes: asyncio.Queue = asyncio.Queue()

    def on_event(self, frame: bytes) -> None:
        event = decode_frame(frame)
        if event.get("_") == "change" and str(event.get("key", "")).startswith("runs/"):
            self.changes.put_nowait((time.perf_counter(), event["value"]))


async def one_turn(url: str, kp, agent_id: str, fake: httpx.AsyncClient, scripts: list[dict]) -> dict:
    for script in scripts:
        (await fake.post("/_fake/script", json=script)).raise_for_status()
    tree = Tree()
    rpc = await Rpc.open(url, on_event=tree.on_event)
    try:
        session = await rpc.call(kp, {"_": "CreateSession", "agentId": agent_id})
        t0 = time.perf_counter()
        sent = await rpc.call(kp, {"_": "MessageSession", "sessionId": session["sessionId"],
                                   "content": [{"type": "text", "text": "fan out"}]})
        root = sent["runId"]
        await rpc.call(kp, {"_": "Subscribe", "key": f"runs/{root}"})
        last_child = wake = None
        ended = set()
        async with asyncio.timeout(60):
            while True:
                at, run = await tree.changes.get()
                if run["id"] != root and run["status"] in ("succeeded", "failed", "canceled"):
                    ended.add(run["id"])
                    if len(ended) == CHILDREN:
                        last_child = at
                elif run["id"] == root and run["status"] == "running" and last_child is not None and wake is None:
                    wake = at - last_child
                elif run["id"] == root and run["status"] in ("succeeded", "failed"):
                    if run["status"] != "succeeded":
                        raise RuntimeError(f"the parent failed: {run.get('error')}")
                    return {"turn": at - t0, "wake": wake}
    finally:
        await rpc.close()


async def measure(url: str, fake_url: str, fanouts: int) -> dict:
    kp = keypair("delegation-bench")
    admin = await Rpc.open(url)
    await admin.call(kp, {"_": "SetModelProvider", "name": "fake", "provider": {"type": "custom", "baseUrl": fake_url}})
    agent = await admin.call(kp, {"_": "CreateAgent", "definition": {
        "name": "fan", "systemPrompt": "be brief", "modelProvider": "fake", "model": "fake-model"}})
    await admin.close()
    plain, turns, wakes = [], [], []
    async with httpx.AsyncClient(base_url=fake_url.rsplit("/v1", 1)[0], timeout=30) as fake:
        await one_turn(url, kp, agent["agentId"], fake, fanout_scripts())   # warm-up
        for _ in range(fanouts):   # interleaved, so both see the same machine
            plain.append((await one_turn(url, kp, agent["agentId"], fake, [{"chunks": ["hi"]}]))["turn"])
            got = await one_turn(url, kp, agent["agentId"], fake, fanout_scripts())
            turns.append(got["turn"])
            wakes.append(got["wake"])
    return {"children": CHILDREN, "fanouts": fanouts, "wake_up": latency_figures(wakes),
            "fanout_turn": latency_figures(turns), "plain_turn": latency_figures(plain)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanouts", type=int, default=50)
    args = parser.parse_args(argv)
    with FakeProvider("plain") as fake, Server("delegation") as server:
        result = asyncio.run(measure(server.url, fake.base_url, args.fanouts))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

"""What the trigger tests share: a server on a manual trigger clock, the calls they make."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime, timezone

from seed_agents.server.triggers.clock import ManualClock

from tests.test_lifecycle_sessions import call
from tests.wsraw import V2Client

ECHO_AGENT = {"name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


def utc_ms(text: str) -> int:
    """'2026-03-29T01:30' (UTC) as Unix ms."""
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


@asynccontextmanager
async def clocked_server(tmp_path, storage: str, request, clock: ManualClock, **settings):
    """A real server (in process, real sockets, a real database) whose triggers read `clock`."""
    from seed_agents.server.main import start_server

    from tests.conftest import server_config

    running = await start_server(server_config(tmp_path, storage, request, trigger_clock=clock, **settings))
    try:
        yield running
    finally:
        await running.stop()


async def make_agent(c: V2Client, kp) -> str:
    r = await call(c, kp, {"_": "CreateAgent", "definition": ECHO_AGENT})
    assert r["_"] == "CreateAgentResponse", r
    return r["agentId"]


async def create_trigger(c: V2Client, kp, agent_id: str, source: dict, *, name: str = "t",
                         prompt: object = "Do the scheduled thing", **extra) -> dict:
    r = await call(c, kp, {"_": "CreateAgentTrigger", "agentId": agent_id,
                           "trigger": {"name": name, "source": source, "prompt": prompt, **extra}})
    assert r["_"] == "CreateAgentTriggerResponse", r
    return r["trigger"]


async def get_trigger(c: V2Client, kp, trigger_id: str) -> dict:
    r = await call(c, kp, {"_": "GetAgentTrigger", "triggerId": trigger_id})
    assert r["_"] == "GetAgentTriggerResponse", r
    return r


async def firings_when(c: V2Client, kp, trigger_id: str, predicate, timeout: float = 10.0) -> list[dict]:
    """The trigger's firings (oldest first) once `predicate(firings)` holds; polled over the
    socket with a bound, since a firing is written by the server's own loop."""
    async with asyncio.timeout(timeout):
        while True:
            firings = (await get_trigger(c, kp, trigger_id))["firings"][::-1]
            if predicate(firings):
                return firings
            await asyncio.sleep(0.02)


async def session_reply(c: V2Client, kp, session_id: str, timeout: float = 10.0) -> list[dict]:
    """The session's events once its run answered (user message, then the reply)."""
    async with asyncio.timeout(timeout):
        while True:
            r = await call(c, kp, {"_": "GetSession", "sessionId": session_id})
            events = [e["event"] for e in r["events"]]
            if any(e.get("role") == "assistant" for e in events):
                return events
            await asyncio.sleep(0.02)

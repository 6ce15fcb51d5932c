"""What the trigger tests share: a server on a manual trigger clock, the calls they make."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any, NamedTuple

from seed_agents.server.triggers.clock import ManualClock

from tests.server.handlers.test_lifecycle_sessions import call
from tests.waiting import until
from tests.wsraw import V2Client, keypair

ECHO_AGENT = {"name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


def utc_ms(text: str) -> int:
    """'2026-03-29T01:30' (UTC) as Unix ms."""
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


@asynccontextmanager
async def clocked_server(tmp_path, storage: str, request, clock: ManualClock, **settings):
    """A real server (in process, real sockets, a real database) whose triggers read `clock`."""

    from tests.conftest import running_server, server_config

    async with running_server(server_config(tmp_path, storage, request, trigger_clock=clock, **settings)) as running:
        yield running


class ClockedAgent(NamedTuple):
    server: Any
    clock: ManualClock
    kp: Any
    c: V2Client
    agent_id: str


@asynccontextmanager
async def clocked_agent(tmp_path, request, t0: int, *, storage: str = "sqlite",
                        **settings) -> AsyncIterator[ClockedAgent]:
    """Where most trigger tests start: a clocked server (its clock at `t0`), account A's socket
    on it and A's echo agent; unpack it as (server, clock, a, c, agent_id)."""
    clock = ManualClock(t0)
    async with clocked_server(tmp_path, storage, request, clock, **settings) as server:
        kp = keypair("A")
        c = await V2Client.open(server.url)
        try:
            yield ClockedAgent(server, clock, kp, c, await make_agent(c, kp))
        finally:
            await c.close()


def every(n: int, unit: str = "minutes") -> dict:
    """An interval schedule's source."""
    return {"type": "schedule", "schedule": {"kind": "interval", "every": n, "unit": unit}}


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
    """The trigger's firings (oldest first) once `predicate(firings)` holds, asked over the
    socket, since a firing is written by the server's own loop."""
    async def firings() -> tuple[list[dict]] | None:
        listed = (await get_trigger(c, kp, trigger_id))["firings"][::-1]
        return (listed,) if predicate(listed) else None

    return (await until(firings, timeout, what=f"the firings of trigger {trigger_id}"))[0]


async def session_reply(c: V2Client, kp, session_id: str, timeout: float = 10.0) -> list[dict]:
    """The session's events once its run answered (user message, then the reply)."""
    async def events() -> list[dict] | None:
        r = await call(c, kp, {"_": "GetSession", "sessionId": session_id})
        listed = [e["event"] for e in r["events"]]
        return listed if any(e.get("role") == "assistant" for e in listed) else None

    return await until(events, timeout, what=f"the reply in session {session_id}")

"""Triggers and the tool loop: the agent manages its own triggers (`write ~/triggers/<name>`,
`read ~/triggers/`) through a scripted model, and a `tool` continuation runs one tool headless,
its call and result in the firing's session."""
from __future__ import annotations

import json

from seed_agents.server.triggers.clock import ManualClock

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.handlers.test_lifecycle_sessions import call
from tests.server.runtime.test_tool_loop import agent_session, run_turn
from tests.server.runtime.test_tool_loop import call as tool_call
from tests.triggers_helpers import (
    clocked_agent,
    clocked_server,
    create_trigger,
    every,
    firings_when,
    get_trigger,
    utc_ms,
)
from tests.wsraw import V2Client, keypair

MIN = 60_000


async def test_the_agent_manages_its_own_triggers(tmp_path, request):
    clock = ManualClock(utc_ms("2026-06-01T07:00"))
    weekly = {"type": "schedule", "schedule": {"kind": "weekly", "daysOfWeek": [1, 2, 3, 4, 5], "timeOfDay": "08:00",
                                               "timezone": "Europe/Berlin"}}
    steps = [
        Script(chunks=[], tool_calls=[tool_call("c1", "write", {
            "address": "~/triggers/morning", "content": json.dumps({"source": weekly, "prompt": "Plan my day"})})]),
        Script(chunks=[], tool_calls=[tool_call("c2", "write", {
            "address": "~/triggers/morning", "content": json.dumps({"enabled": False})})]),
        Script(chunks=[], tool_calls=[tool_call("c3", "read", {"address": "~/triggers/"}),
                                      tool_call("c4", "write", {"address": "~/triggers/bad",
                                                                "content": json.dumps({"prompt": "p"})})]),
        Script(chunks=["Done."]),
    ]
    async with FakeOpenAI() as fake, clocked_server(tmp_path, "sqlite", request, clock,
                                                    allow_provider_base_url=True) as server:
        fake.enqueue(*steps)
        kp = keypair("self-managing")
        c = await V2Client.open(server.url)
        agent_id, sid = await agent_session(c, kp, "custom", fake.base_url)
        _, appends = await run_turn(c, kp, sid)
        results = {e["event"]["toolCallId"]: e["event"] for e in appends if e["event"]["type"] == "tool_result"}
        assert results["c1"]["output"]["summary"] == "Created trigger morning."
        assert results["c2"]["output"]["trigger"]["enabled"] is False
        listing = results["c3"]["output"]
        assert [t["name"] for t in listing["triggers"]] == ["morning"] and "Writing a trigger" in listing["markdown"]
        # A new trigger without a source: the call fails with the reason and the contract.
        assert "trigger.source is required" in results["c4"]["error"] and "Writing a trigger" in results["c4"]["error"]
        triggers = (await call(c, kp, {"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"]
        assert [(t["name"], t["enabled"], t["source"], t["prompt"]) for t in triggers] == [
            ("morning", False, weekly, "Plan my day")]
        await c.close()


async def test_a_tool_continuation_runs_one_tool_headless(tmp_path, request):
    t0 = utc_ms("2026-06-01T07:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        minutely = every(1)
        good = await create_trigger(c, a, agent_id, minutely, name="note", prompt="", continuation={
            "kind": "tool", "tool": "write", "input": {"address": "~/memory/ticks.md", "content": "tick"}})
        bad = await create_trigger(c, a, agent_id, minutely, name="missing", prompt="", continuation={
            "kind": "tool", "tool": "read", "input": {"address": "~/memory/nothing-here.md"}})
        # A callable tool, through `call` as a model would: memory search (finds the note later).
        search = await create_trigger(c, a, agent_id, minutely, name="search", prompt="", continuation={
            "kind": "tool", "tool": "search_memory", "input": {"query": "tick"}})
        unknown = await create_trigger(c, a, agent_id, minutely, name="unknown", prompt="", continuation={
            "kind": "tool", "tool": "teleport"})
        clock.advance(MIN)
        for trigger, status in ((good, "succeeded"), (bad, "failed")):
            firings = await firings_when(c, a, trigger["id"], lambda f: f and "runStatus" in f[0])
            assert firings[0]["status"] == "created" and firings[0]["runStatus"] == status
            events = [e["event"] for e in (await call(c, a, {"_": "GetSession", "sessionId": firings[0]["sessionId"]}))["events"]]
            assert [(e["type"], e["actor"]) for e in events] == [("tool_call", "trigger"), ("tool_result", "trigger")]
            assert events[1]["toolCallId"] == events[0]["id"]
        note = [e["event"] for e in (await call(c, a, {"_": "GetSession", "sessionId": (await get_trigger(
            c, a, good["id"]))["firings"][0]["sessionId"]}))["events"]]
        assert note[1]["output"]["summary"].startswith("Wrote ~/memory/ticks.md")
        got = (await get_trigger(c, a, bad["id"]))["trigger"]
        assert "tool 'read' failed" in got["lastError"]
        searched = await firings_when(c, a, search["id"], lambda f: f and "runStatus" in f[0])
        assert searched[0]["runStatus"] == "succeeded"
        events = [e["event"] for e in (await call(c, a, {"_": "GetSession", "sessionId": searched[0]["sessionId"]}))["events"]]
        assert events[0]["name"] == "search_memory" and "results" in events[1]["output"]
        refused = (await get_trigger(c, a, unknown["id"]))["firings"]
        assert refused[0]["status"] == "error" and "not one this server runs headless" in refused[0]["error"]

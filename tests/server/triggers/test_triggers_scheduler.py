"""Schedules firing on a real server whose trigger clock the test moves (nothing sleeps): each
slot once, with its session and reply; weekly across DST; once; cron; a server stopped for three
slots fires once and records two skipped; repeated failures back off."""
from __future__ import annotations

from seed_agents.server.triggers.clock import ManualClock

from tests.server.handlers.test_lifecycle_sessions import call
from tests.triggers_helpers import (
    clocked_agent,
    clocked_server,
    create_trigger,
    every,
    firings_when,
    get_trigger,
    make_agent,
    session_reply,
    utc_ms,
)
from tests.wsraw import V2Client, keypair

MIN = 60_000


async def test_interval_fires_each_slot_once_with_a_session(tmp_path, request):
    t0 = utc_ms("2026-05-04T10:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        trigger = await create_trigger(c, a, agent_id, every(5), name="digest", prompt="Summarize the news")
        scheduler = server.app.triggers.scheduler
        clock.advance(4 * MIN)            # not yet due: the timer is set for the slot, nothing fires
        assert (await get_trigger(c, a, trigger["id"]))["firings"] == []
        for n in range(1, 4):
            clock.advance(MIN if n == 1 else 5 * MIN)
            firings = await firings_when(c, a, trigger["id"], lambda f, n=n: len(f) >= n)
        assert [f["scheduledAt"] for f in firings] == [t0 + 5 * MIN, t0 + 10 * MIN, t0 + 15 * MIN]
        assert [f["activityKey"] for f in firings] == [f"schedule:{trigger['id']}:{f['scheduledAt']}" for f in firings]
        assert all(f["status"] == "created" for f in firings)
        assert len({f["sessionId"] for f in firings}) == 3
        events = await session_reply(c, a, firings[0]["sessionId"])
        assert events[0]["role"] == "user" and events[0]["content"] == "Summarize the news"
        assert any("schedule" in line for line in events[0]["contextLines"])
        assert events[-1]["content"] == "echo: Summarize the news"
        # GetSession carries the trigger card the desktop shows: the trigger as it was when it fired.
        context = (await call(c, a, {"_": "GetSession", "sessionId": firings[0]["sessionId"]}))["triggerContext"]
        assert (context["triggerId"], context["triggerName"], context["prompt"], context["firingId"]) == (
            trigger["id"], "digest", "Summarize the news", firings[0]["id"])
        assert context["activity"]["scheduledAt"] == t0 + 5 * MIN and context["status"] == "created"
        plain = (await call(c, a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        assert "triggerContext" not in await call(c, a, {"_": "GetSession", "sessionId": plain})
        # The agent's session lists say which sessions a trigger started (the desktop's badge).
        for listed in ((await call(c, a, {"_": "GetAgent", "agentId": agent_id}))["sessions"],
                       (await call(c, a, {"_": "ListSessions", "agentId": agent_id}))["sessions"]):
            by_id = {s["id"]: s for s in listed}
            assert "startedByTrigger" not in by_id[plain]
            badge = by_id[firings[0]["sessionId"]]["startedByTrigger"]
            assert (badge["triggerId"], badge["triggerName"], badge["firingId"]) == (trigger["id"], "digest",
                                                                                     firings[0]["id"])
            assert badge["activitySummary"] == "scheduled interval at 2026-05-04 10:05 UTC"
        got = await get_trigger(c, a, trigger["id"])
        assert got["trigger"]["lastFiredAt"] == t0 + 15 * MIN
        assert {s["id"] for s in got["sessions"]} == {f["sessionId"] for f in firings}
        assert all(s["startedByTrigger"]["triggerId"] == trigger["id"] for s in got["sessions"])
        # One timer: a handful of wakeups for three slots, not a poll loop.
        assert scheduler.wakeups < 20


async def test_weekly_across_both_berlin_transitions_and_new_yorks_repeated_hour(tmp_path, request):
    t0 = utc_ms("2026-03-28T12:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        berlin = {"type": "schedule", "schedule": {"kind": "weekly", "daysOfWeek": [0], "timeOfDay": "02:30",
                                                   "timezone": "Europe/Berlin"}}
        spring = await create_trigger(c, a, agent_id, berlin, name="spring")
        # Step through the spring-forward night ten minutes at a time: 02:30 never exists, yet
        # the slot fires once (at 03:30 summer time, 01:30 UTC).
        while clock.now_ms() < utc_ms("2026-03-29T04:00"):
            clock.advance(10 * MIN)
        firings = await firings_when(c, a, spring["id"], lambda f: len(f) >= 1)
        assert [f["scheduledAt"] for f in firings] == [utc_ms("2026-03-29T01:30")]
        await call(c, a, {"_": "DeleteAgentTrigger", "triggerId": spring["id"]})

        clock.set(utc_ms("2026-10-24T12:00"))
        fall = await create_trigger(c, a, agent_id, berlin, name="fall")
        while clock.now_ms() < utc_ms("2026-10-25T03:00"):   # 02:30 local happens twice
            clock.advance(10 * MIN)
        firings = await firings_when(c, a, fall["id"], lambda f: len(f) >= 1)
        assert [f["scheduledAt"] for f in firings] == [utc_ms("2026-10-25T00:30")]
        await call(c, a, {"_": "DeleteAgentTrigger", "triggerId": fall["id"]})

        clock.set(utc_ms("2026-10-31T12:00"))
        new_york = {"type": "schedule", "schedule": {"kind": "weekly", "daysOfWeek": list(range(7)),
                                                     "timeOfDay": "01:30", "timezone": "America/New_York"}}
        ny = await create_trigger(c, a, agent_id, new_york, name="ny")
        while clock.now_ms() < utc_ms("2026-11-01T08:00"):   # 01:30 local at 05:30 and 06:30 UTC
            clock.advance(10 * MIN)
        firings = await firings_when(c, a, ny["id"], lambda f: len(f) >= 1)
        assert [f["scheduledAt"] for f in firings] == [utc_ms("2026-11-01T05:30")]
        # ... and the repeated 01:30 EST went by without a second firing.
        clock.advance(MIN)
        assert len((await get_trigger(c, a, ny["id"]))["firings"]) == 1


async def test_once_and_cron(tmp_path, request):
    t0 = utc_ms("2026-07-01T08:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        once = await create_trigger(c, a, agent_id, {"type": "schedule", "schedule": {
            "kind": "once", "runAt": t0 + 10 * MIN, "timezone": "Europe/Berlin"}}, name="once")
        cron = await create_trigger(c, a, agent_id, {"type": "schedule", "schedule": {
            "kind": "cron", "expression": "*/15 * * * *", "timezone": "Europe/Berlin"}}, name="cron")
        for _ in range(6):          # 08:15 .. 09:30 UTC in steps of 15 minutes
            clock.advance(15 * MIN)
            await firings_when(c, a, cron["id"], lambda f: f and f[-1]["scheduledAt"] == clock.now_ms())
        firings = (await get_trigger(c, a, cron["id"]))["firings"][::-1]
        assert [f["scheduledAt"] for f in firings] == [t0 + k * 15 * MIN for k in range(1, 7)]
        assert all(f["status"] == "created" for f in firings)
        once_firings = await firings_when(c, a, once["id"], lambda f: len(f) >= 1)
        assert [f["scheduledAt"] for f in once_firings] == [t0 + 10 * MIN]
        clock.advance(7 * 24 * 60 * MIN)
        await firings_when(c, a, cron["id"], lambda f: f[-1]["scheduledAt"] == clock.now_ms() - clock.now_ms() % (15 * MIN))
        assert len((await get_trigger(c, a, once["id"]))["firings"]) == 1


async def test_a_server_stopped_for_three_slots_fires_once_and_records_two_skipped(tmp_path, request):
    t0 = utc_ms("2026-02-02T06:00")
    clock = ManualClock(t0)
    a = keypair("A")
    async with clocked_server(tmp_path, "sqlite", request, clock) as server:
        c = await V2Client.open(server.url)
        agent_id = await make_agent(c, a)
        trigger = await create_trigger(c, a, agent_id, every(1), name="minutely")
        clock.advance(MIN)
        await firings_when(c, a, trigger["id"], lambda f: len(f) == 1)
        await c.close()
    clock.advance(3 * MIN + 20_000)       # down for the slots at +2, +3 and +4 minutes
    async with clocked_server(tmp_path, "sqlite", request, clock) as server:
        c = await V2Client.open(server.url)
        firings = await firings_when(c, a, trigger["id"], lambda f: len(f) == 4)
        assert [(f["scheduledAt"] - t0) // MIN for f in firings] == [1, 2, 3, 4]
        assert [f["status"] for f in firings] == ["created", "skipped", "skipped", "created"]
        assert all("missed" in f["error"] for f in firings[1:3])
        assert all("sessionId" not in f for f in firings[1:3])
        clock.advance(40_000)             # the next slot (+5) fires on time again
        firings = await firings_when(c, a, trigger["id"], lambda f: len(f) == 5)
        assert firings[-1]["status"] == "created" and (firings[-1]["scheduledAt"] - t0) // MIN == 5
        await c.close()


async def test_repeated_failures_back_off_and_show_the_last_error(tmp_path, request):
    t0 = utc_ms("2026-02-02T06:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        trigger = await create_trigger(c, a, agent_id, every(1), name="waker",
                                       continuation={"kind": "wake", "signal": "go"})
        for n in range(1, 6):
            clock.advance(MIN)
            firings = await firings_when(c, a, trigger["id"], lambda f, n=n: len(f) == n)
        # 1st and 2nd fail; the 2nd starts a minute's backoff, which ends as slot 3 comes; the
        # 3rd fails and backs off two minutes: slot 4 is skipped, slot 5 tries again.
        assert [f["status"] for f in firings] == ["error", "error", "error", "skipped", "error"]
        assert "waiting for the signal 'go'" in firings[0]["error"] and "backing off" in firings[3]["error"]
        got = (await get_trigger(c, a, trigger["id"]))["trigger"]
        assert "waiting for the signal 'go'" in got["lastError"]
        # Turning it off and on again clears the backoff and the error.
        for enabled in (False, True):
            r = await call(c, a, {"_": "UpdateAgentTrigger", "triggerId": trigger["id"], "patch": {"enabled": enabled}})
            assert r["_"] == "UpdateAgentTriggerResponse", r
        assert "lastError" not in r["trigger"]


async def test_hourly_bound_and_history_pruning(tmp_path, request):
    t0 = utc_ms("2026-02-02T06:00")
    async with clocked_agent(tmp_path, request, t0, trigger_firings_per_hour=2,
                             trigger_history=4) as (server, clock, a, c, agent_id):
        trigger = await create_trigger(c, a, agent_id, every(10), name="busy")
        for n in range(1, 6):
            clock.advance(10 * MIN)
            firings = await firings_when(c, a, trigger["id"], lambda f, n=n: f and f[-1]["scheduledAt"] == t0 + n * 10 * MIN)
        # Two firings an hour start work; the rest of the hour is recorded as skipped. Only the
        # latest four firings are kept.
        assert [(f["scheduledAt"] - t0) // MIN for f in firings] == [20, 30, 40, 50]
        assert [f["status"] for f in firings] == ["created", "skipped", "skipped", "skipped"]
        assert "2 trigger firings per hour" in firings[-1]["error"]
        clock.advance(70 * MIN)    # an hour past the first two: it starts work again
        firings = await firings_when(c, a, trigger["id"], lambda f: f[-1]["scheduledAt"] == t0 + 120 * MIN)
        assert firings[-1]["status"] == "created"
        assert [f["status"] for f in firings][-2] == "skipped" and "missed" in firings[-2]["error"]


async def test_firings_are_counted_on_metrics(tmp_path, request):
    import httpx

    t0 = utc_ms("2026-02-02T06:00")
    async with clocked_agent(tmp_path, request, t0) as (server, clock, a, c, agent_id):
        trigger = await create_trigger(c, a, agent_id, every(1), name="counted")
        clock.advance(3 * MIN)      # the latest fires, two missed slots are skipped
        await firings_when(c, a, trigger["id"], lambda f: len(f) == 3)
        async with httpx.AsyncClient() as http:
            text = (await http.get(server.http_url + "/metrics")).text
        assert 'seed_agents_trigger_firings_total{source="schedule",status="created"} 1.0' in text
        assert 'seed_agents_trigger_firings_total{source="schedule",status="skipped"} 2.0' in text

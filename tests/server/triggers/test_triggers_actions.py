"""The five trigger actions over real sockets, on SQLite and PostgreSQL: shapes, validation,
access (readers list, writers manage, strangers get 404), bounds, run-completed firing, and what
DeleteAgent takes with it."""
from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.handlers.test_lifecycle_sessions import call
from tests.server.runtime.test_runtime_turns import provider_session, send, session_status
from tests.triggers_helpers import create_trigger, firings_when, get_trigger, make_agent
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")

HOURLY = {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}}


async def test_create_list_get_update_delete(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id = await make_agent(c, a)
    blocks = [{"block": {"type": "Paragraph", "id": "p1", "text": "Read the inbox"}, "children": []}]
    trigger = await create_trigger(c, a, agent_id, HOURLY, name="inbox", prompt=blocks)
    assert trigger["agentId"] == agent_id and trigger["account"] == a.account_id and trigger["enabled"] is True
    assert trigger["source"] == HOURLY and trigger["prompt"] == blocks and "continuation" not in trigger
    assert trigger["createdAt"] == trigger["updatedAt"]
    assert not any(k.startswith("_") for k in trigger)
    listed = await call(c, a, {"_": "ListAgentTriggers", "agentId": agent_id})
    assert listed == {"_": "ListAgentTriggersResponse", "triggers": [trigger]}
    got = await get_trigger(c, a, trigger["id"])
    assert got["trigger"] == trigger and got["sessions"] == [] and got["firings"] == [] and "webhook" not in got

    patch = {"name": "inbox2", "enabled": False, "prompt": "text now",
             "continuation": {"kind": "newThread"},
             "source": {"type": "run-completed", "agentId": agent_id, "status": "failed"}}
    r = await call(c, a, {"_": "UpdateAgentTrigger", "triggerId": trigger["id"], "patch": patch})
    assert r["_"] == "UpdateAgentTriggerResponse", r
    updated = r["trigger"]
    assert (updated["name"], updated["enabled"], updated["prompt"], updated["source"], updated["continuation"]) == (
        "inbox2", False, "text now", patch["source"], {"kind": "newThread"})
    # clientRequestId: a retry answers the first creation; another request with it is 409.
    action = {"_": "CreateAgentTrigger", "agentId": agent_id, "clientRequestId": "req-1",
              "trigger": {"name": "once", "source": HOURLY, "prompt": "p"}}
    first = await call(c, a, action)
    assert await call(c, a, action) == first
    other = await call(c, a, {**action, "trigger": {**action["trigger"], "name": "else"}})
    assert (other["_"], other["status"]) == ("Error", 409)

    r = await call(c, a, {"_": "DeleteAgentTrigger", "triggerId": trigger["id"]})
    assert r == {"_": "DeleteAgentTriggerResponse", "triggerId": trigger["id"]}
    r = await call(c, a, {"_": "GetAgentTrigger", "triggerId": trigger["id"]})
    assert (r["_"], r["status"]) == ("Error", 404)
    assert [t["name"] for t in (await call(c, a, {"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"]] == ["once"]
    await c.close()


BAD = [
    ({"name": "x", "prompt": "p", "source": {"type": "nope"}}, "source.type must be one of"),
    ({"name": "x", "prompt": "p", "source": {"type": "schedule", "schedule": {"kind": "interval", "every": 0,
                                                                              "unit": "minutes"}}}, "every"),
    ({"name": "x", "prompt": "p", "source": {"type": "schedule", "schedule": {
        "kind": "weekly", "daysOfWeek": [7], "timeOfDay": "09:00", "timezone": "UTC"}}}, "daysOfWeek"),
    ({"name": "x", "prompt": "p", "source": {"type": "schedule", "schedule": {
        "kind": "weekly", "daysOfWeek": [1], "timeOfDay": "25:00", "timezone": "UTC"}}}, "timeOfDay"),
    ({"name": "x", "prompt": "p", "source": {"type": "schedule", "schedule": {
        "kind": "weekly", "daysOfWeek": [1], "timeOfDay": "09:00", "timezone": "Mars/Base"}}}, "unknown time zone"),
    ({"name": "x", "prompt": "p", "source": {"type": "schedule", "schedule": {
        "kind": "cron", "expression": "99 * * * *"}}}, "cron expression"),
    ({"name": "x", "prompt": "p", "source": {"type": "user-mention", "mentionedAccounts": []}}, "at least one"),
    ({"name": "x", "prompt": "p", "source": {"type": "comment-reply"}}, "parentAuthor"),
    ({"name": "x", "prompt": "p", "source": {"type": "run-completed", "status": "done"}}, "status"),
    ({"name": "x", "prompt": "p", "source": {"type": "run-completed", "agentId": "not-mine"}}, "not an agent"),
    ({"name": "x", "prompt": 7, "source": HOURLY}, "prompt must be text or an array"),
    ({"name": "x", "prompt": "p", "source": HOURLY, "continuation": {"kind": "jump"}}, "continuation.kind"),
    ({"name": " ", "prompt": "p", "source": HOURLY}, "name must not be empty"),
]


@pytest.mark.storages("sqlite")   # parsing and checks, before any storage is touched
async def test_bad_triggers_are_400_naming_the_field(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id = await make_agent(c, a)
    for trigger, fault in BAD:
        r = await call(c, a, {"_": "CreateAgentTrigger", "agentId": agent_id, "trigger": trigger})
        assert (r["_"], r["status"]) == ("Error", 400) and fault in r["message"], r
    assert (await call(c, a, {"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"] == []
    await c.close()


async def test_readers_list_writers_manage_strangers_see_nothing(server):
    owner, writer, reader, stranger = (keypair(n) for n in ("O", "W", "R", "S"))
    o, w, r, s = [await V2Client.open(server.url) for _ in range(4)]
    agent_id = await make_agent(o, owner)
    hook = await create_trigger(o, owner, agent_id, {"type": "webhook"}, name="hook")
    for kp, client, role in ((writer, w, "writer"), (reader, r, "reader")):
        got = await call(o, owner, {"_": "InviteAgentCollaborator", "agentId": agent_id,
                                     "accountId": kp.account_id, "role": role})
        assert got["_"] == "InviteAgentCollaboratorResponse", got
        assert (await call(client, kp, {"_": "AcceptAgentInvite", "agentId": agent_id}))["_"] == "AcceptAgentInviteResponse"
    # The owner and a writer see the webhook's secret; a reader sees the trigger without it.
    secret = (await get_trigger(o, owner, hook["id"]))["webhook"]
    assert secret["path"] == f"/agents/hooks/{hook['id']}" and secret["secret"].startswith("whsec_")
    assert (await get_trigger(w, writer, hook["id"]))["webhook"] == secret
    assert "webhook" not in await get_trigger(r, reader, hook["id"])
    assert [t["id"] for t in (await call(r, reader, {"_": "ListAgentTriggers", "agentId": agent_id}))["triggers"]] == [hook["id"]]
    made = await create_trigger(w, writer, agent_id, HOURLY, name="by writer")
    assert made["account"] == owner.account_id   # the owner's data, as a writer's session is
    for action in ({"_": "CreateAgentTrigger", "agentId": agent_id, "trigger": {"name": "n", "source": HOURLY, "prompt": "p"}},
                   {"_": "UpdateAgentTrigger", "triggerId": hook["id"], "patch": {"enabled": False}},
                   {"_": "DeleteAgentTrigger", "triggerId": hook["id"]}):
        got = await call(r, reader, action)
        assert (got["_"], got["status"]) == ("Error", 403), (action, got)
        got = await call(s, stranger, action)
        assert (got["_"], got["status"]) == ("Error", 404), (action, got)
    for action in ({"_": "ListAgentTriggers", "agentId": agent_id}, {"_": "GetAgentTrigger", "triggerId": hook["id"]}):
        got = await call(s, stranger, action)
        assert (got["_"], got["status"]) == ("Error", 404), (action, got)
    for client in (o, w, r, s):
        await client.close()


async def test_bounds_names_and_delete_agent(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id = await make_agent(c, a)
    server.app.config.trigger_max_per_agent = 2
    await create_trigger(c, a, agent_id, HOURLY, name="one")
    dup = await call(c, a, {"_": "CreateAgentTrigger", "agentId": agent_id,
                            "trigger": {"name": "one", "source": HOURLY, "prompt": "p"}})
    assert (dup["_"], dup["status"]) == ("Error", 409) and "already has a trigger named" in dup["message"]
    await create_trigger(c, a, agent_id, {"type": "webhook"}, name="two")
    full = await call(c, a, {"_": "CreateAgentTrigger", "agentId": agent_id,
                             "trigger": {"name": "three", "source": HOURLY, "prompt": "p"}})
    assert (full["_"], full["status"]) == ("Error", 409) and "the most it may have" in full["message"]
    assert (await call(c, a, {"_": "DeleteAgent", "agentId": agent_id}))["_"] == "DeleteAgentResponse"
    left = server.app.db.read(lambda conn: [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in (
        "agent_triggers", "webhook_trigger_credentials", "trigger_firings")])
    assert left == [0, 0, 0]
    await c.close()


async def test_run_completed_fires_once_per_run_with_filters(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    watched = await make_agent(c, a)
    follower = await make_agent(c, a)
    done = await create_trigger(c, a, follower, {"type": "run-completed", "agentId": watched, "status": "succeeded",
                                                 "titleMatch": "REPORT"}, name="after report", prompt="Check it")
    run_ids = []
    for text in ("weekly report", "unrelated"):   # (a run's title is its session's first line)
        session_id = (await call(c, a, {"_": "CreateSession", "agentId": watched}))["sessionId"]
        run_ids.append((await send(c, a, session_id, text))["runId"])
    await session_status(c, a, session_id, "idle")
    firings = await firings_when(c, a, done["id"], lambda f: len(f) >= 1)
    assert [f["activityKey"] for f in firings] == [run_ids[0]]
    assert firings[0]["status"] == "created" and firings[0]["activity"]["runStatus"] == "succeeded"
    # The follower's own run (started by the firing) ends too, and does not match: still one.
    follower_session = firings[0]["sessionId"]
    got = await call(c, a, {"_": "GetSession", "sessionId": follower_session})
    assert got["session"]["agentId"] == follower
    assert len((await get_trigger(c, a, done["id"]))["firings"]) == 1
    await c.close()


async def test_a_canceled_run_fires_run_completed_whether_or_not_it_was_running(server):
    """A queued run canceled (CancelRun) has no turn to report its end: the cancel itself tells
    the triggers, in its transaction. A running one canceled (StopSession) is reported by its
    turn when it stops. Each fires once, keyed by its run."""
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30)) as fake:
        c = await V2Client.open(server.url)
        watched, session_id = await provider_session(c, a, fake)
        follower = await make_agent(c, a)
        trigger = await create_trigger(c, a, follower, {"type": "run-completed", "agentId": watched,
                                                        "status": "canceled"}, name="after cancel", prompt="Look")
        running = (await send(c, a, session_id, "slow"))["runId"]
        await fake.wait_for_requests(1)
        queued = (await send(c, a, session_id, "behind it"))["runId"]
        assert (await call(c, a, {"_": "GetRun", "runId": queued}))["run"]["status"] == "queued"
        assert (await call(c, a, {"_": "CancelRun", "runId": queued}))["canceled"] is True
        firings = await firings_when(c, a, trigger["id"], lambda f: len(f) >= 1)
        assert [f["activityKey"] for f in firings] == [queued]
        assert firings[0]["activity"]["runStatus"] == "canceled"
        await call(c, a, {"_": "StopSession", "sessionId": session_id})
        firings = await firings_when(c, a, trigger["id"], lambda f: len(f) >= 2)
        assert sorted(f["activityKey"] for f in firings) == sorted([queued, running])
        assert len((await get_trigger(c, a, trigger["id"]))["firings"]) == 2
        await c.close()

"""UpdateSession, DeleteSession, RetrySession, StopSession's answer, ListSessions' lineage and
cursor, and automatic titles, end to end over real sockets (echo and a fake OpenAI server)."""
from __future__ import annotations

import asyncio
import time

import pytest

from seed_agents.protocol.wire.envelope import NULL
from seed_agents.server.store import sessions as sessions_q

from tests.fakes.openai_server import FakeOpenAI, Script
from tests.server.runtime.test_runtime_turns import provider_session, send, session_status, until_durable
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session
from tests.model_view import without_preamble

# The `server` of each test runs on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.storages("sqlite", "postgresql")


_last_ts = 0


def unique_ts() -> int:
    global _last_ts
    _last_ts = max(time.time_ns() // 1_000_000, _last_ts + 1)
    return _last_ts


async def call(c, kp, action: dict) -> dict:
    """`c.call` signed with a timestamp of its own: an action repeated within one millisecond
    (say a second DeleteSession expecting 404) is not the same bytes, which would be a replay."""
    return await c.call(kp, action, ts=unique_ts())


async def wait_for(predicate, what: str, timeout: float = 10.0):
    """Poll an async predicate until it returns a truthy value."""
    return await until(predicate, timeout, what=what)


async def runs_of(c, kp, sid):
    return (await call(c, kp, {"_": "ListRuns", "sessionId": sid}))["runs"]


async def watched_session(server, c, kp, fake):
    """A provider session of `fake` (tests/server/runtime/test_runtime_turns.provider_session) and a second
    socket subscribed to it from its first event: (agent_id, session_id, watcher)."""
    watcher = await V2Client.open(server.url)
    agent_id, sid = await provider_session(c, kp, fake)
    assert (await call(watcher, kp, {"_": "Subscribe", "key": f"sessions/{sid}", "afterSeq": 0}))["_"] == \
        "SubscribeResponse"   # afterSeq: not the bytes of c's own Subscribe of this millisecond
    return agent_id, sid, watcher


async def reply_streams(watcher) -> None:
    """Until the watched reply's text streams (live activity comes first)."""
    async with asyncio.timeout(10):
        while "textDelta" not in (await watcher.event()).get("patch", {}):
            pass


async def nothing_after_the_deletion(watcher) -> None:
    """The watcher's events until it has been quiet half a second: the session-deleted change
    comes, and nothing after it."""
    seen_deletion, after = False, []
    while True:
        try:
            e = await watcher.event(timeout=0.5)
        except (asyncio.TimeoutError, TimeoutError):
            break
        if seen_deletion:
            after.append(e)
        elif e["_"] == "change" and e["value"].get("reason") == "session-deleted":
            seen_deletion = True
    assert seen_deletion and after == []


async def test_update_session_title_and_model_override(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    agent_id, sid = await setup_session(c, a)
    # echo takes no reasoning level (protocol/agent/reasoning.py): 400, and nothing changes
    r = await call(c, a, {"_": "UpdateSession", "sessionId": sid, "title": "Plans",
                         "modelOverride": {"provider": "echo", "model": "echo-2", "reasoningLevel": "low"}})
    assert (r["_"], r["status"]) == ("Error", 400) and "reasoning level" in r["message"], r
    r = await call(c, a, {"_": "UpdateSession", "sessionId": sid, "title": "Plans",
                         "modelOverride": {"provider": "echo", "model": "echo-2"}})
    assert r["_"] == "UpdateSessionResponse"
    assert r["session"]["title"] == "Plans" and r["session"]["id"] == sid
    assert r["session"]["modelOverride"] == {"provider": "echo", "model": "echo-2"}
    # absent leaves the override alone; null clears it
    r = await call(c, a, {"_": "UpdateSession", "sessionId": sid, "title": "Plans 2"})
    assert r["session"]["modelOverride"]["model"] == "echo-2"
    r = await call(c, a, {"_": "UpdateSession", "sessionId": sid, "modelOverride": NULL})
    assert "modelOverride" not in r["session"] and r["session"]["title"] == "Plans 2", r
    got = await call(c, a, {"_": "GetSession", "sessionId": sid})
    assert got["session"] == r["session"]
    # another account: 404; bad fields: 400 naming the field
    c2 = await V2Client.open(server.url)
    r = await call(c2, b, {"_": "UpdateSession", "sessionId": sid, "title": "mine"})
    assert (r["_"], r["status"]) == ("Error", 404)
    for bad, field in [({"title": 5}, "UpdateSession.title"), ({}, "UpdateSession.title"),
                       ({"modelOverride": "echo"}, "UpdateSession.modelOverride"),
                       ({"modelOverride": {"provider": "echo"}}, "UpdateSession.modelOverride.model")]:
        r = await call(c, a, {"_": "UpdateSession", "sessionId": sid, **bad})
        assert (r["_"], r["status"]) == ("Error", 400) and field in r["message"], (bad, r)
    await c.close(); await c2.close()


async def test_model_override_is_used_while_its_provider_exists(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["from fake"])) as fake:
        c = await V2Client.open(server.url)
        await provider_session(c, a, fake)   # defines provider "fake"
        agent_id, sid = await setup_session(c, a)   # an echo agent
        r = await call(c, a, {"_": "UpdateSession", "sessionId": sid,
                             "modelOverride": {"provider": "fake", "model": "override-model"}})
        assert r["_"] == "UpdateSessionResponse"
        await send(c, a, sid, "hi")
        got = await wait_for(lambda: _events_when(c, a, sid, 2), "reply")
        reply = got[1]["event"]
        assert reply["content"] == "from fake" and reply["meta"]["model"] == "override-model"
        assert fake.requests[-1].body["model"] == "override-model"
        # the override's provider goes away: turns fall back to the agent's own (echo)
        assert (await call(c, a, {"_": "DeleteModelProvider", "name": "fake"}))["name"] == "fake"
        await send(c, a, sid, "again")
        got = await wait_for(lambda: _events_when(c, a, sid, 4), "reply")
        assert got[3]["event"]["content"] == "echo: again"
        await c.close()


async def _events_when(c, kp, sid, n):
    got = await call(c, kp, {"_": "GetSession", "sessionId": sid})
    return got["events"] if len(got["events"]) >= n else None


async def test_automatic_title_and_a_user_title_set_during_a_turn_survives(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["slow", " reply"], first_delay=0.5)) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        long_line = "x" * 80
        await send(c, a, sid, f"\n  {long_line}  \nsecond line")
        _, appends = await until_durable(c, 2)
        got = await session_status(c, a, sid, "idle")
        assert got["session"]["title"] == "x" * 60   # first non-blank line, 60 characters
        # a second session: renamed while its first turn streams
        sid2 = (await call(c, a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
        await send(c, a, sid2, "automatic title candidate")
        await fake.wait_for_requests(2)
        r = await call(c, a, {"_": "UpdateSession", "sessionId": sid2, "title": "Mine"})
        assert r["session"]["title"] == "Mine"
        got = await wait_for(lambda: _events_when(c, a, sid2, 2), "reply")
        assert got[1]["event"]["content"] == "slow reply"
        got = await session_status(c, a, sid2, "idle")
        assert got["session"]["title"] == "Mine"
        await c.close()


async def test_stop_session_answers_stopped_false_when_nothing_ran(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    _, sid = await setup_session(c, a)
    r = await call(c, a, {"_": "StopSession", "sessionId": sid})
    assert r == {"_": "StopSessionResponse", "sessionId": sid, "stopped": False}
    c2 = await V2Client.open(server.url)
    r = await call(c2, b, {"_": "StopSession", "sessionId": sid})
    assert (r["_"], r["status"]) == ("Error", 404)
    await c.close(); await c2.close()


async def test_retry_after_a_provider_failure(server):
    a, b = keypair("A"), keypair("B")
    async with FakeOpenAI(Script(chunks=["second", " time"])) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await c.event(); await c.event()
        # nothing failed yet: 409
        r = await call(c, a, {"_": "RetrySession", "sessionId": sid})
        assert (r["_"], r["status"]) == ("Error", 409)
        fake.enqueue(Script(status=500))   # fails once, then the default answers
        first = await send(c, a, sid, "please answer")
        _, appends = await until_durable(c, 2)
        assert appends[1]["event"]["type"] == "error"
        await session_status(c, a, sid, "error")
        failed = (await call(c, a, {"_": "GetRun", "runId": first["runId"]}))["run"]
        assert failed["status"] == "failed" and failed["error"]["code"] == "provider-error"
        assert "500" in failed["error"]["message"] and failed["finishedAt"] >= failed["startedAt"]
        c2 = await V2Client.open(server.url)
        r = await call(c2, b, {"_": "RetrySession", "sessionId": sid})
        assert (r["_"], r["status"]) == ("Error", 404)
        r = await call(c, a, {"_": "RetrySession", "sessionId": 7})
        assert (r["_"], r["status"]) == ("Error", 400) and "RetrySession.sessionId" in r["message"]
        r = await call(c, a, {"_": "RetrySession", "sessionId": sid})
        assert r["_"] == "RetrySessionResponse" and r["sessionId"] == sid and r["assistantEventId"] == ""
        assert r["runId"] != first["runId"]
        _, appends = await until_durable(c, 1)
        assert appends[0]["event"]["content"] == "second time"
        got = await session_status(c, a, sid, "idle")
        # no new user message; the model saw the user message and not the error event
        assert [e["event"]["type"] for e in got["events"]] == ["message", "error", "message"]
        assert without_preamble(fake.requests[-1].body["messages"]) == [
            {"role": "system", "content": "You are terse."}, {"role": "user", "content": "please answer"}]
        retried = (await call(c, a, {"_": "GetRun", "runId": r["runId"]}))["run"]
        assert retried["status"] == "succeeded" and retried["title"] == failed["title"]
        # the latest run succeeded: nothing to retry
        r = await call(c, a, {"_": "RetrySession", "sessionId": sid})
        assert (r["_"], r["status"]) == ("Error", 409)
        await c.close(); await c2.close()


async def test_retry_while_a_run_is_live_is_409(server):
    a = keypair("A")
    async with FakeOpenAI(Script(first_delay=30)) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await send(c, a, sid, "slow")
        await fake.wait_for_requests(1)
        r = await call(c, a, {"_": "RetrySession", "sessionId": sid})
        assert (r["_"], r["status"]) == ("Error", 409) and "live run" in r["message"]
        assert (await call(c, a, {"_": "StopSession", "sessionId": sid}))["stopped"] is True
        await c.close()


async def test_delete_session_detaches_runs_and_children(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    agent_id, sid = await setup_session(c, a)
    await send(c, a, sid, "hello")
    await session_status(c, a, sid, "idle")
    run_id = (await runs_of(c, a, sid))[0]["id"]
    child_id = "child-of-" + sid

    def make_child(conn):
        sessions_q.create_session(conn, child_id, a.account_id, agent_id, "child", server.app.now_ms(),
                                  parent_session_id=sid)

    await server.app.db.write(make_child)
    listed = await call(c, a, {"_": "ListSessions", "parentSessionId": sid})
    assert [s["id"] for s in listed["sessions"]] == [child_id]
    assert listed["sessions"][0]["parentSessionId"] == sid
    top = await call(c, a, {"_": "ListSessions", "includeChildren": False})
    assert [s["id"] for s in top["sessions"]] == [sid]
    assert top["sessions"][0]["childSessionCount"] == 1
    c2 = await V2Client.open(server.url)
    r = await call(c2, b, {"_": "DeleteSession", "sessionId": sid})
    assert (r["_"], r["status"]) == ("Error", 404)
    r = await call(c, a, {"_": "DeleteSession", "sessionId": ""})
    assert (r["_"], r["status"]) == ("Error", 400) and "DeleteSession.sessionId" in r["message"]
    r = await call(c, a, {"_": "DeleteSession", "sessionId": sid})
    assert r == {"_": "DeleteSessionResponse", "sessionId": sid, "agentId": agent_id}
    r = await call(c, a, {"_": "GetSession", "sessionId": sid})
    assert (r["_"], r["status"]) == ("Error", 404)
    r = await call(c, a, {"_": "DeleteSession", "sessionId": sid})
    assert (r["_"], r["status"]) == ("Error", 404)
    run = (await call(c, a, {"_": "GetRun", "runId": run_id}))["run"]
    assert run["status"] == "succeeded" and "sessionId" not in run   # history kept, detached
    child = (await call(c, a, {"_": "GetSession", "sessionId": child_id}))["session"]
    assert "parentSessionId" not in child
    top = await call(c, a, {"_": "ListSessions", "includeChildren": False})
    assert [s["id"] for s in top["sessions"]] == [child_id]
    assert server.app.db.read(lambda conn: conn.execute(
        "SELECT count(*) FROM session_events WHERE session_id = ?", (sid,)).fetchone()[0]) == 0
    await c.close(); await c2.close()


async def test_delete_while_a_reply_streams(server):
    a = keypair("A")
    async with FakeOpenAI(Script(chunks=[f"w{i} " for i in range(200)], chunk_delay=0.01)) as fake:
        c = await V2Client.open(server.url)
        agent_id, sid, watcher = await watched_session(server, c, a, fake)
        await send(c, a, sid, "talk a lot")
        await reply_streams(watcher)
        r = await call(c, a, {"_": "DeleteSession", "sessionId": sid})
        assert r["_"] == "DeleteSessionResponse"
        # everything the watcher gets until the provider call is over, and a little more
        await fake.wait_for_disconnect()
        await call(c, a, {"_": "ListAgents"})   # a round trip: publications of the deletion are out
        await nothing_after_the_deletion(watcher)
        run = (await call(c, a, {"_": "GetRun", "runId": await _only_run(c, a, agent_id)}))["run"]
        assert run["status"] == "canceled" and "sessionId" not in run
        assert server.app.db.read(lambda conn: conn.execute(
            "SELECT count(*) FROM session_events WHERE session_id = ?", (sid,)).fetchone()[0]) == 0
        await c.close(); await watcher.close()


async def _only_run(c, kp, agent_id):
    runs = (await call(c, kp, {"_": "ListRuns", "agentId": agent_id}))["runs"]
    assert len(runs) == 1
    return runs[0]["id"]


async def test_cursor_never_loses_or_repeats_rows_sharing_one_millisecond(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, _ = await setup_session(c, a)
    same = server.app.now_ms() + 10_000   # newer than the session made above

    def many(conn):
        for i in range(57):
            sessions_q.create_session(conn, f"tie-{i:03}", a.account_id, agent_id, None, same)

    await server.app.db.write(many)
    seen, cursor = [], None
    while True:
        action = {"_": "ListSessions", "agentId": agent_id, "limit": 10}
        if cursor is not None:
            action["cursor"] = cursor
        r = await call(c, a, action)
        assert r["_"] == "ListSessionsResponse", r
        seen += [s["id"] for s in r["sessions"]]
        cursor = r.get("nextCursor")
        if cursor is None:
            break
        assert set(cursor) == {"updatedBefore", "idBefore"} and cursor["updatedBefore"] == same
    assert len(seen) == 58 and len(set(seen)) == 58
    assert seen[:57] == sorted((f"tie-{i:03}" for i in range(57)), reverse=True)
    r = await call(c, a, {"_": "ListSessions", "cursor": "opaque-old-form"})
    assert (r["_"], r["status"]) == ("Error", 400) and "ListSessions.cursor" in r["message"]
    r = await call(c, a, {"_": "ListSessions", "includeChildren": "no"})
    assert (r["_"], r["status"]) == ("Error", 400) and "ListSessions.includeChildren" in r["message"]
    await c.close()

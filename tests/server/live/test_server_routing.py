"""The routing of CONTRACT section 5 over real sockets: `agents/<id>` also receives its
sessions' changes and the account notices that name it; `account/<id>` receives every event of
the account (appends and partials of all its sessions, every change, every notice); and every
notice reason is sent when it happens, `agent-updated` and `session-updated` included."""
from __future__ import annotations

import asyncio

from tests.wsraw import V1, V2Client, flatten, keypair, setup_session


async def drain_until(c, predicate, timeout=20) -> list:
    """Events until `predicate(events so far)` holds."""
    got: list = []
    async with asyncio.timeout(timeout):
        while not predicate(got):
            got.append(await c.event(timeout))
    return got


def notices(events, account_id) -> list[dict]:
    return [e["value"] for e in events if e["_"] == "change" and e["key"] == f"account/{account_id}"]


def reply_done(session_id):
    return lambda got: any(x["event"].get("role") == "assistant" and x["sessionId"] == session_id
                           for e in got for x in flatten(e))


async def turn(c, kp, session_id, text):
    r = await c.call(kp, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    return r


async def test_agent_subscriber_sees_its_sessions_changes_and_notices_only(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    other_agent, other_session = await setup_session(c, a)
    watcher = await V2Client.open(server.url)
    await watcher.call(a, {"_": "Subscribe", "key": f"agents/{agent_id}"})
    first = await watcher.event()
    assert first == {"_": "change", "key": f"agents/{agent_id}", "value": first["value"]}
    assert first["value"]["id"] == agent_id

    new_session = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    await turn(c, a, other_session, "elsewhere")   # another agent: nothing of it may arrive
    await turn(c, a, session_id, "hello")
    # until the reply's agent change (after the reply's session change, which says idle)
    got = await drain_until(watcher, lambda got: any(
        e["key"] == f"agents/{agent_id}" and e["value"].get("activity", {}).get("messageFrom") == "assistant"
        for e in got))
    keys = {e["key"] for e in got}
    assert keys <= {f"agents/{agent_id}", f"sessions/{new_session}", f"sessions/{session_id}", f"account/{a.account_id}"}
    assert all(e["_"] == "change" for e in got)        # no appends, no partials on an agent key
    assert all(e["value"].get("agentId", agent_id) == agent_id for e in got)
    sessions = [e["value"] for e in got if e["key"].startswith("sessions/")]
    assert {"streaming", "idle"} <= {s["status"] for s in sessions if s["id"] == session_id}
    assert any(s["id"] == new_session for s in sessions)   # the created session's change
    reasons = [(n["reason"], n.get("sessionId")) for n in notices(got, a.account_id)]
    assert ("session-created", new_session) in reasons
    assert ("session-event", session_id) in reasons and ("session-updated", session_id) in reasons
    assert ("agent-updated", None) in reasons
    assert all(n["agentId"] == agent_id for n in notices(got, a.account_id))
    agents = [e["value"] for e in got if e["key"] == f"agents/{agent_id}"]
    assert agents[-1]["activity"]["messageFrom"] == "assistant"   # published after the reply
    assert other_agent not in repr(got) and other_session not in repr(got)
    await watcher.close()
    await c.close()


async def test_account_subscriber_sees_every_event_of_the_account(server):
    a, b = keypair("A"), keypair("B")
    c = await V2Client.open(server.url)
    watcher = await V2Client.open(server.url)
    r = await watcher.call(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    assert r == {"_": "SubscribeResponse", "key": f"account/{a.account_id}", "accountId": a.account_id}
    stranger = await V2Client.open(server.url)
    await stranger.call(b, {"_": "Subscribe", "key": f"account/{b.account_id}"})

    agent_id, s1 = await setup_session(c, a)
    s2 = (await c.call(a, {"_": "CreateSession", "agentId": agent_id}))["sessionId"]
    await turn(c, a, s1, "one two three")
    await drain_until(watcher, reply_done(s1))
    run = await turn(c, a, s2, "four")
    got = await drain_until(watcher, reply_done(s2))
    await c.call(a, {"_": "SetModelProvider", "name": "p", "provider": {"type": "ollama"}})
    got += await drain_until(watcher, lambda g: any(n.get("reason") == "model-provider-changed"
                                                    for n in notices(g, a.account_id)))

    # appends of both sessions, each with its own seq (not filtered as one stream)
    appends = [(x["sessionId"], x["seq"]) for e in got for x in flatten(e)]
    assert (s2, 1) in appends and (s2, 2) in appends
    partials = [e for e in got if e["_"] == "appendPartial"]
    assert partials and all(e["key"] == f"sessions/{s2}" and e["partialId"] == run["runId"] for e in partials)
    assert "".join(p["patch"].get("textDelta", "") for p in partials) == "echo: four"
    changed = {e["key"] for e in got if e["_"] == "change"}
    assert {f"sessions/{s2}", f"agents/{agent_id}", f"runs/{run['runId']}", f"account/{a.account_id}"} <= changed
    runs = [e["value"]["status"] for e in got if e["key"] == f"runs/{run['runId']}"]
    assert runs[0] == "queued" and runs[-1] == "succeeded"
    reasons = {n["reason"] for n in notices(got, a.account_id)}
    assert reasons >= {"session-event", "session-updated", "agent-updated", "model-provider-changed"}

    # B hears nothing of A's account
    assert stranger.events.empty()
    r = await stranger.call(b, {"_": "SetModelProvider", "name": "mine", "provider": {"type": "ollama"}})
    assert r["_"] == "SetModelProviderResponse"
    assert (await stranger.event())["value"] == {"reason": "model-provider-changed"}
    assert stranger.events.empty()
    for client in (c, watcher, stranger):
        await client.close()


async def test_every_notice_reason_arrives_in_order_on_v1(server):
    """A v1 (JSON) account subscriber, as the desktop keeps one: agent-created, session-created,
    then per turn session-event, session-updated and agent-updated."""
    a = keypair("A")
    v1 = await V1.open(server.url)
    r = await v1.send(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    assert r == {"_": "subscribed", "key": f"account/{a.account_id}", "accountId": a.account_id}
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    await turn(c, a, session_id, "hi")
    events = []
    async with asyncio.timeout(20):
        while not (events and events[-1]["_"] == "append" and events[-1]["event"]["event"]["role"] == "assistant"):
            events.append(await v1.recv())
        # the reply's changes and notices follow its append
        while not [n for n in notices(events[-6:], a.account_id) if n["reason"] == "session-event"]:
            events.append(await v1.recv())
    reasons = [(n["reason"], n.get("agentId"), n.get("sessionId")) for n in notices(events, a.account_id)]
    assert reasons[:2] == [("agent-created", agent_id, None), ("session-created", agent_id, session_id)]
    rest = [r for r, *_ in reasons[2:]]
    assert rest.count("session-event") == 2    # the user message and the reply
    assert "session-updated" in rest and "agent-updated" in rest
    appends = [e for e in events if e["_"] == "append"]
    assert [e["event"]["seq"] for e in appends] == [1, 2] and all(e["key"] == f"sessions/{session_id}" for e in appends)
    await v1.close()
    await c.close()


async def test_appends_on_an_account_key_are_not_a_resume_point(server):
    """The slow-consumer close reason names `sessions/<id> last seq N` so that a client resumes
    with afterSeq N. Appends that reached the socket through an `account/` subscription are not
    a replayed stream (no gap filling), so they must not become that resume point."""
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    watcher = await V2Client.open(server.url)
    await watcher.call(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    await turn(c, a, session_id, "hello")
    await drain_until(watcher, reply_done(session_id))
    [conn] = [x for x in server.app.connections if x.subs.get(f"account/{a.account_id}")]
    assert conn.outbound.slow_reason(None) == "slow consumer"   # what a cut-off would say now
    # a sessions/ subscription on the same socket is the resume point, with its own seq
    await watcher.call(a, {"_": "Subscribe", "key": f"sessions/{session_id}"})
    await drain_until(watcher, lambda got: any(e.get("_") == "replayed" for e in got))
    assert conn.outbound.slow_reason(None) == f"slow consumer; sessions/{session_id} last seq 2"
    await watcher.close()
    await c.close()


async def test_a_socket_gets_each_event_once_whatever_covers_it(server):
    """One v1 socket follows a session, its agent and its account (as the desktop may); it
    receives exactly what a socket following only the account receives (which gets every event
    of the account once): nothing twice, appends in seq order, partials once."""
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    v1 = await V1.open(server.url)
    for key in (f"account/{a.account_id}", f"agents/{agent_id}", f"sessions/{session_id}"):
        first = await v1.send(a, {"_": "Subscribe", "key": key, "n": key})
        while first["_"] != "subscribed":   # a subscription's current value may come first
            first = await v1.recv()
    assert (await v1.recv())["key"] == f"sessions/{session_id}"   # the session's current value
    only_account = await V2Client.open(server.url)
    await only_account.call(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    await turn(c, a, session_id, "one two")
    await turn(c, a, session_id, "three")

    def done(events):
        return sum(1 for e in events if e["_"] == "append" and e["event"]["event"]["role"] == "assistant") == 2 \
            and events[-1]["_"] == "change" and events[-1]["value"].get("reason") == "session-event"

    both, alone = [], []
    async with asyncio.timeout(20):
        while not done(both):
            both.append(await v1.recv())
        while not done(alone):
            alone.append(await only_account.event())
    assert [e["event"]["seq"] for e in both if e["_"] == "append"] == [1, 2, 3, 4]
    assert both == alone
    await v1.close()
    await only_account.close()
    await c.close()

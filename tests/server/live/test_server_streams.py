"""Subscriptions over real sockets: replay then live with no gap and no duplicate, turns that
stream, and GetSession paging."""
from __future__ import annotations

import asyncio

from tests.waiting import until
from tests.wsraw import V1, V2Client, flatten, keypair, setup_session


async def collect_until(client, predicate, timeout=20):
    got = []
    async with asyncio.timeout(timeout):
        while True:
            e = await client.event(timeout)
            got.append(e)
            if predicate(e, got):
                return got


async def wait_for_events(client, kp, session_id, n, timeout=20):
    """Poll GetSession until the session holds `n` events and its run has ended."""
    async def ended() -> dict | None:
        got = await client.call(kp, {"_": "GetSession", "sessionId": session_id})
        return got if len(got["events"]) >= n and got["session"]["status"] == "idle" else None

    return await until(ended, timeout, what=f"{n} events and the run ended")


async def test_echo_turn_streams_partials_then_durable_reply(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, a)
    key = f"sessions/{session_id}"
    await c.call(a, {"_": "Subscribe", "key": key})
    r = await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [
        {"type": "text", "text": "hello  big\nworld"}, {"type": "context", "lines": ["ctx line"]}]})
    assert r["_"] == "MessageSessionResponse" and r["assistantEventId"] == ""
    events = await collect_until(c, lambda e, _: any(
        x["event"].get("role") == "assistant" for x in flatten(e)))
    # What arrived after the durable reply, up to a later marker answer on the same socket: no
    # partial may trail the reply.
    assert (await c.call(a, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
    later = []
    while not c.events.empty():
        later.append(c.events.get_nowait())
    assert not [e for e in later if e["_"] == "appendPartial"], later
    # every partial, the done one last, comes after the user's event and before the durable reply
    kinds = [(e["_"], e["patch"] if e["_"] == "appendPartial" else
              [x["event"]["role"] for x in flatten(e)]) for e in events]
    partial_at = [i for i, e in enumerate(events) if e["_"] == "appendPartial"]
    user_at = next(i for i, e in enumerate(events) if any(
        x["event"].get("role") == "user" for x in flatten(e)))
    assert partial_at and user_at < partial_at[0], kinds
    assert events[partial_at[-1]]["patch"].get("done") is True, kinds
    partials = [e["patch"] for e in events if e["_"] == "appendPartial"]
    deltas = [p["textDelta"] for p in partials if "textDelta" in p]
    appends = [x for e in events for x in flatten(e)]
    user, assistant = appends[0], appends[-1]
    assert user["event"]["content"] == "hello  big\nworld"
    assert user["event"]["contextLines"] == ["ctx line"]
    assert user["event"]["meta"] == {"accountId": a.account_id, "signerId": a.account_id}
    assert len(deltas) >= 3 and assistant["event"]["content"] == "echo: hello  big\nworld" == "".join(deltas)
    assert assistant["event"]["meta"]["provider"] == "echo" and "durationMs" in assistant["event"]["meta"]
    got = await c.call(a, {"_": "GetSession", "sessionId": session_id})
    assert [e["seq"] for e in got["events"]] == [1, 2]
    assert got["systemPromptMarkdown"] == "be brief"
    # status settles to idle
    got = await wait_for_events(c, a, session_id, 2)
    assert got["session"]["status"] == "idle"
    await c.close()


async def test_v1_subscribe_replays_json_then_live(server):
    a = keypair("A")
    c2 = await V2Client.open(server.url)
    _, session_id = await setup_session(c2, a)
    await c2.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "one"}]})
    await wait_for_events(c2, a, session_id, 2)   # the reply (seq 2) is stored
    v1 = await V1.open(server.url)
    key = f"sessions/{session_id}"
    r = await v1.send(a, {"_": "Subscribe", "key": key, "afterSeq": 1})
    assert r == {"_": "subscribed", "key": key, "accountId": a.account_id}
    change = await v1.recv()
    assert change["_"] == "change" and change["value"]["id"] == session_id
    replayed = await v1.recv()
    assert replayed["_"] == "append" and replayed["event"]["seq"] == 2
    await c2.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "two"}]})
    seqs = []
    while len(seqs) < 2:
        e = await v1.recv()
        if e["_"] == "append":
            seqs.append(e["event"]["seq"])
    assert seqs == [3, 4]
    # a bad subscribe in v1 answers with the lower-case error event
    r = await v1.send(a, {"_": "Subscribe", "key": "sessions/00000000-0000-4000-8000-000000000000"})
    while r["_"] in ("change", "appendPartial", "append"):   # the live stream goes on meanwhile
        r = await v1.recv()
    assert r["_"] == "error" and r["status"] == 404
    await v1.close()
    await c2.close()


async def test_replay_then_live_has_no_gap_and_no_duplicate(server):
    """A writer appends while subscribers join at different afterSeq values."""
    a = keypair("A")
    writer = await V2Client.open(server.url)
    _, session_id = await setup_session(writer, a)
    key = f"sessions/{session_id}"
    turns = 60   # each turn appends a user and an assistant event

    async def write():
        for i in range(turns):
            r = await writer.call(a, {"_": "MessageSession", "sessionId": session_id,
                                      "content": [{"type": "text", "text": f"m{i}"}]})
            assert r["_"] == "MessageSessionResponse", r
            await asyncio.sleep(0.005)   # the writer's pace, so subscribers join mid-stream

    async def subscriber(delay, after_seq):
        await asyncio.sleep(delay)   # a staggered join while the writer writes
        c = await V2Client.open(server.url)
        await c.call(a, {"_": "Subscribe", "key": key, "afterSeq": after_seq})
        seqs = []
        async with asyncio.timeout(60):
            while not seqs or seqs[-1] < 2 * turns:
                e = await c.event(30)
                seqs += [x["seq"] for x in flatten(e)]
        await c.close()
        return after_seq, seqs

    results = await asyncio.gather(write(), *(subscriber(0.03 * i, s) for i, s in
                                              enumerate([0, 0, 3, 10, 25, 40, 60, 90])))
    for after_seq, seqs in results[1:]:
        assert seqs == list(range(after_seq + 1, 2 * turns + 1)), (after_seq, seqs[:20])
    await writer.close()


async def test_get_session_pages_with_next_after_seq(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    _, session_id = await setup_session(c, a)
    for i in range(5):
        await c.call(a, {"_": "MessageSession", "sessionId": session_id,
                         "content": [{"type": "text", "text": f"m{i}"}], "clientMessageId": f"c{i}"})
    await wait_for_events(c, a, session_id, 10)
    seqs, after = [], 0
    while True:
        page = await c.call(a, {"_": "GetSession", "sessionId": session_id, "afterSeq": after, "limit": 3})
        seqs += [e["seq"] for e in page["events"]]
        if "nextAfterSeq" not in page:
            break
        after = page["nextAfterSeq"]
        assert after == seqs[-1]
    assert seqs == list(range(1, 11))
    await c.close()


async def test_account_agent_and_run_subscriptions(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    await c.call(a, {"_": "Subscribe", "key": f"account/{a.account_id}"})
    agent_id, session_id = await setup_session(c, a)

    async def changes(key: str, field: str, last: str) -> list:
        """`value[field]` of each change on `key`, until one equals `last`."""
        seen = []
        async with asyncio.timeout(10):
            while last not in seen:
                e = await c.event()
                if e["key"] == key:
                    seen.append(e["value"][field])
        return seen

    reasons = await changes(f"account/{a.account_id}", "reason", "session-created")
    assert reasons[:2] == ["agent-created", "session-created"]
    r = await c.call(a, {"_": "MessageSession", "sessionId": session_id, "content": [{"type": "text", "text": "x"}]})
    await c.call(a, {"_": "Subscribe", "key": f"runs/{r['runId']}"})
    statuses = await changes(f"runs/{r['runId']}", "status", "succeeded")
    assert statuses[-1] == "succeeded"
    await c.close()


async def test_pages_also_end_at_a_byte_bound(server):
    """GetSession stops a page past 4 MiB of events; nextAfterSeq leads to the rest."""
    a = keypair("A")
    c = await V2Client.open(server.url)
    _, session_id = await setup_session(c, a)
    big = "w" * 150_000
    for i in range(16):   # 16 user + 16 echo replies of ~150 KB: about 4.8 MB in all
        await c.call(a, {"_": "MessageSession", "sessionId": session_id,
                         "content": [{"type": "text", "text": f"{i}{big}"}], "clientMessageId": f"b{i}"})

    async def paged() -> tuple[list[int], int] | None:
        """Every page from the start; None while replies are still running (read again)."""
        seqs, after, pages = [], 0, 0
        while True:
            page = await c.call(a, {"_": "GetSession", "sessionId": session_id, "afterSeq": after})
            pages += 1
            seqs += [e["seq"] for e in page["events"]]
            if "nextAfterSeq" not in page:
                return (seqs, pages) if len(seqs) == 32 else None
            after = page["nextAfterSeq"]

    seqs, pages = await until(paged, 20, step=0.1, what="all 32 events, in pages")
    assert seqs == list(range(1, 33)) and pages >= 2
    await c.close()

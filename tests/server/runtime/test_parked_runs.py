"""Parked runs over real sockets: SignalRun (from another socket; twice wakes once), the clock,
cancel of a parked parent's subtree, children created by a parking turn and the parent woken by
the last of them, the run journal (GetRunJournal and runs/<root> live and on replay).

A turn parks through the runtime's own path (`runtime.parked.park_turn`, what the tool loop calls
when a reply asks to delegate or wait); the run is put in 'running' by the store first, as the
runtime does when it takes a run, so the test decides when the turn parks."""
from __future__ import annotations

import asyncio
import types

import pytest

from seed_agents.server.clock import new_id
from seed_agents.server.runtime.parked import ParkRequest as Park
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import journal as journal_q
from seed_agents.server.store import parking
from seed_agents.server.store import runs as runs_q
from seed_agents.server.tools.delegation_tools import Delegation

from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

pytestmark = pytest.mark.storages("sqlite", "postgresql")


async def running_turn(app, session_id: str, agent_id: str, account: str, text: str = "go") -> dict:
    """A user message and its run, in 'running' (as the runtime holds a run it executes)."""
    now = app.now_ms()

    def job(conn):
        event, _ = events_q.append_event(conn, session_id, {"type": "message", "role": "user", "content": text},
                                         new_id(), now)
        run = runs_q.create_run(conn, new_id(), account, agent_id, session_id, event["id"], now, title=text)
        if conn.traits.run_leases:
            conn.execute("UPDATE runs SET status = 'running', attempt = 1, lease_owner = ?,"
                         " lease_expires_at = 9999999999999 WHERE id = ?",
                         (app.runtime.queue.leases.owner, run["id"]))
            return runs_q.get_run(conn, run["id"])
        return runs_q.set_run_status(conn, run["id"], "running", now)

    run = await app.db.write(job)
    if app.db.traits.run_leases:
        app.runtime.queue.leases.held[run["id"]] = (run["attempt"], 0.0)
    return run


async def park_on_signal(app, run: dict, agent: dict, *, signal: str | None = "approved",
                         timeout_ms: int | None = None) -> dict:
    wait = {"reason": "event", "waitId": new_id(), "label": "approval", "answerWith": signal or "any"}
    if timeout_ms is not None:
        wait["timeoutAt"] = app.now_ms() + timeout_ms
    park = Park([], wait=wait, match={} if signal is None else {"signal": signal})
    parked = await app.runtime.parked.park_turn(run, agent, park, types.SimpleNamespace(gone=False))
    assert parked is not None and parked["status"] == "waiting", parked
    return parked




async def run_status(c: V2Client, kp, run_id: str) -> dict:
    r = await c.call(kp, {"_": "GetRun", "runId": run_id})
    assert r["_"] == "GetRunResponse", r
    return r["run"]


async def wait_status(c, kp, run_id: str, status: str, timeout=15.0) -> dict:
    async def reached() -> dict | None:
        run = await run_status(c, kp, run_id)
        return run if run["status"] == status else None

    return await until(reached, timeout, step=0.05, what=f"run {run_id} {status}")


async def setup(server, label: str):
    kp = keypair(label)
    c = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(c, kp)
    agent = server.app.db.read(agents_q.get_agent, agent_id)
    return kp, c, agent, session_id


async def test_signal_from_another_socket_wakes_the_run_once(server):
    kp, c, agent, session_id = await setup(server, "parked-signal")
    app = server.app
    run = await running_turn(app, session_id, agent["id"], agent["account"])
    parked = await park_on_signal(app, run, agent)
    assert parked["wait"] == {"reason": "event", "label": "approval", "answerWith": "approved"}
    shown = await run_status(c, kp, run["id"])
    assert shown["status"] == "waiting" and shown["wait"]["reason"] == "event"
    assert app.runtime.workers.get(session_id) is None   # parked: no worker held

    other = await V2Client.open(server.url)
    wrong = await other.call(kp, {"_": "SignalRun", "runId": run["id"], "signal": "rejected"})
    assert wrong == {"_": "SignalRunResponse", "runId": run["id"], "delivered": False}
    first, second = await asyncio.gather(
        other.call(kp, {"_": "SignalRun", "runId": run["id"], "signal": "approved", "payload": {"ok": True}}),
        c.call(kp, {"_": "SignalRun", "runId": run["id"], "signal": "approved", "payload": {"ok": True}}))
    assert sorted([first["delivered"], second["delivered"]]) == [False, True], (first, second)
    done = await wait_status(c, kp, run["id"], "succeeded")
    assert done["attempt"] == 2 and "wait" not in done
    journal = await c.call(kp, {"_": "GetRunJournal", "runId": run["id"]})
    kinds = [(e["seq"], e["entry"]["kind"]) for e in journal["entries"]]
    assert kinds == [(1, "wait"), (2, "event")], kinds
    assert journal["entries"][1]["entry"]["delivery"] == {"source": "signal", "signal": "approved",
                                                          "payload": {"ok": True}}
    again = await other.call(kp, {"_": "SignalRun", "runId": run["id"], "signal": "approved"})
    assert again["delivered"] is False
    # exactly one more turn ran: one assistant reply in the session
    session = await c.call(kp, {"_": "GetSession", "sessionId": session_id})
    replies = [e for e in session["events"] if e["event"].get("role") == "assistant"]
    assert len(replies) == 1, session["events"]
    await other.close()
    await c.close()


@pytest.mark.storages("sqlite")   # (store-agnostic: both stores run the tests above)
async def test_a_reader_cannot_signal_and_a_stranger_sees_nothing(server):
    kp, c, agent, session_id = await setup(server, "parked-access")
    run = await running_turn(server.app, session_id, agent["id"], agent["account"])
    await park_on_signal(server.app, run, agent)
    stranger, sc = keypair("parked-stranger"), await V2Client.open(server.url)
    r = await sc.call(stranger, {"_": "SignalRun", "runId": run["id"], "signal": "approved"})
    assert r["_"] == "Error" and r["status"] == 404, r
    r = await sc.call(stranger, {"_": "GetRunJournal", "runId": run["id"]})
    assert r["_"] == "Error" and r["status"] == 404, r
    r = await c.call(kp, {"_": "SetAgentPublicRead", "agentId": agent["id"], "publicRead": True})
    r = await sc.call(stranger, {"_": "SignalRun", "runId": run["id"], "signal": "approved"})
    assert r["_"] == "Error" and r["status"] == 403, r
    r = await sc.call(stranger, {"_": "GetRunJournal", "runId": run["id"]})
    assert r["_"] == "GetRunJournalResponse" and len(r["entries"]) == 1, r
    await sc.close()
    await c.close()


@pytest.mark.storages("sqlite")   # (store-agnostic: both stores run the tests above)
async def test_the_clock_ends_a_wait_and_cancel_ends_a_parked_run(server):
    kp, c, agent, session_id = await setup(server, "parked-clock")
    app = server.app
    run = await running_turn(app, session_id, agent["id"], agent["account"])
    await park_on_signal(app, run, agent, timeout_ms=300)
    done = await wait_status(c, kp, run["id"], "succeeded")
    journal = await c.call(kp, {"_": "GetRunJournal", "runId": run["id"]})
    assert journal["entries"][-1]["entry"]["timedOut"] is True
    assert done["attempt"] == 2

    run2 = await running_turn(app, session_id, agent["id"], agent["account"], "second")
    await park_on_signal(app, run2, agent, signal=None)
    r = await c.call(kp, {"_": "CancelRun", "runId": run2["id"]})
    assert r == {"_": "CancelRunResponse", "runId": run2["id"], "canceled": True}
    assert (await run_status(c, kp, run2["id"]))["status"] == "canceled"
    assert app.db.read(lambda conn: conn.execute("SELECT count(*) FROM run_event_waits").fetchone()[0]) == 0
    r = await c.call(kp, {"_": "SignalRun", "runId": run2["id"], "signal": "anything"})
    assert r["delivered"] is False
    await c.close()


async def test_a_parking_turn_spawns_children_and_wakes_when_the_last_ends(server):
    """Children of the parked parent run (echo answers each), each answer lands in the parent's
    session as the delegate call's tool_result, and the last one wakes the parent, which runs
    again; the tree, its journal and runs/<root> (live, then replayed) say all of it."""
    kp, c, agent, session_id = await setup(server, "parked-children")
    app = server.app
    sub = await V2Client.open(server.url)
    run = await running_turn(app, session_id, agent["id"], agent["account"], "fan out")
    r = await sub.call(kp, {"_": "Subscribe", "key": "runs/" + run["id"]})
    assert r["_"] == "SubscribeResponse", r
    first = await sub.event()
    assert first["_"] == "change" and first["value"]["id"] == run["id"]
    park = Park([Delegation(f"call-{i}", f"child {i}", f"brief {i}", {"brief": f"brief {i}"}) for i in range(3)])
    parked = await app.runtime.parked.park_turn(run, agent, park, types.SimpleNamespace(gone=False))
    assert parked is not None
    done = await wait_status(c, kp, run["id"], "succeeded")
    assert done["attempt"] == 2
    tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": run["id"]}))["runs"]
    assert [t["depth"] for t in tree] == [0, 1, 1, 1]
    children = tree[1:]
    assert {t["parentToolCallId"] for t in children} == {"call-0", "call-1", "call-2"}
    assert all(t["status"] == "succeeded" and t["parentRunId"] == run["id"] and t["rootRunId"] == run["id"]
               and t["origin"] == "agent" for t in children)
    events = (await c.call(kp, {"_": "GetSession", "sessionId": session_id}))["events"]
    spawns = [e["event"] for e in events if e["event"]["type"] == "tool_spawn"]
    results = [e["event"] for e in events if e["event"]["type"] == "tool_result"]
    assert len(spawns) == 3 and len(results) == 3
    for result in results:
        assert result["output"]["status"] == "succeeded"
        assert result["output"]["output"]["text"].startswith("echo: brief ")
    listed = await c.call(kp, {"_": "ListSessions", "parentSessionId": session_id})
    assert len(listed["sessions"]) == 3 and all(s.get("runId") for s in listed["sessions"])
    kinds = [e["entry"]["kind"] for e in (await c.call(kp, {"_": "GetRunJournal", "runId": run["id"]}))["entries"]]
    assert kinds[:4] == ["call", "call", "call", "wait"] and kinds.count("result") == 3 and kinds[-1] == "fired"

    # live: every run's moves and every journal entry arrived on runs/<root>
    seen_runs, seen_journal = {}, set()
    while not (len(seen_journal) == len(kinds) and seen_runs.get(run["id"]) == "succeeded"
               and len([s for s in seen_runs.values() if s == "succeeded"]) == 4):
        e = await sub.event()
        if e["_"] == "change":
            seen_runs[e["value"]["id"]] = e["value"]["status"]
        elif e["_"] == "append":
            assert e["key"] == "runs/" + run["id"] and e["runId"] == run["id"]
            seen_journal.add(e["seq"])
    # replay: a new subscriber gets the tree and the journal
    late = await V2Client.open(server.url)
    await late.call(kp, {"_": "Subscribe", "key": "runs/" + run["id"]})
    replay = [await late.event() for _ in range(4 + len(kinds))]
    assert [e["value"]["id"] for e in replay[:4]] == [t["id"] for t in tree]
    assert [(e["runId"], e["seq"]) for e in replay[4:]] == [(run["id"], i) for i in range(1, len(kinds) + 1)]
    for client in (late, sub, c):
        await client.close()


@pytest.mark.storages("sqlite")   # (store-agnostic: both stores run the tests above)
async def test_cancelling_a_parked_parent_cancels_its_children(server):
    kp, c, agent, session_id = await setup(server, "parked-cancel-tree")
    app = server.app
    run = await running_turn(app, session_id, agent["id"], agent["account"], "fan out")
    # children that cannot start: their session's queue is held by a parked run of their own
    park = Park([Delegation(f"c{i}", f"child {i}", f"brief {i}", {}) for i in range(2)])
    original = app.runtime.kick
    app.runtime.kick = lambda session_id: None   # the children stay queued
    try:
        await app.runtime.parked.park_turn(run, agent, park, types.SimpleNamespace(gone=False))
    finally:
        app.runtime.kick = original
    r = await c.call(kp, {"_": "CancelRun", "runId": run["id"]})
    assert r["canceled"] is True
    tree = (await c.call(kp, {"_": "ListRuns", "rootRunId": run["id"]}))["runs"]
    assert [t["status"] for t in tree] == ["canceled"] * 3
    await c.close()


def test_journal_caps(conn):
    """At most 5,000 entries or 8 MiB per run: the append past a cap writes nothing."""
    from seed_agents.server.store import sessions as sessions_q

    agents_q.create_agent(conn, "a", "acct", {"name": "x", "systemPrompt": "", "modelProvider": "echo",
                                              "model": "e"}, "dir", 1)
    sessions_q.create_session(conn, "s", "acct", "a", None, 1)
    runs_q.create_run(conn, "r", "acct", "a", "s", None, 1)
    big = {"kind": "log", "text": "x" * ((1 << 20) - 100)}   # 8 of these fit in 8 MiB, a 9th does not
    for i in range(8):
        assert journal_q.append(conn, "r", big, 1)["seq"] == i + 1
    with pytest.raises(journal_q.JournalFull):
        journal_q.append(conn, "r", big, 1)
    runs_q.create_run(conn, "r2", "acct", "a", "s", None, 1)
    with conn:   # one transaction: 5,000 commits would be 5,000 fsyncs
        for _ in range(journal_q.MAX_ENTRIES):
            journal_q.append(conn, "r2", {"kind": "log"}, 1)
    with pytest.raises(journal_q.JournalFull):
        journal_q.append(conn, "r2", {"kind": "log"}, 1)
    assert len(journal_q.entries(conn, "r2", 4990, 100)) == 10
    assert parking.next_wake(conn) is None


def test_a_signal_without_a_run_finds_the_agents_waiting_run(conn):
    """What a trigger's `wake` continuation without a runId uses: the agent's oldest wait that
    the signal answers is delivered, once; another agent's waits (even the same account's) and
    another account's are not looked at."""
    from seed_agents.server.store import sessions as sessions_q

    for agent_id in ("a", "b"):
        agents_q.create_agent(conn, agent_id, "acct", {"name": "x", "systemPrompt": "", "modelProvider": "echo",
                                                       "model": "e"}, "dir-" + agent_id, 1)
    for n, (account, agent_id, signal) in enumerate((("acct", "a", "other"), ("acct", "a", "go"),
                                                     ("acct", "a", "go"), ("else", "a", "go"), ("acct", "b", "go"))):
        sessions_q.create_session(conn, f"s{n}", account, agent_id, None, 1)
        run = runs_q.create_run(conn, f"r{n}", account, agent_id, f"s{n}", None, 1)
        run = runs_q.set_run_status(conn, run["id"], "running", 2)
        parking.park(conn, run, {"reason": "event", "waitId": f"w{n}"}, 3 + n, match={"signal": signal})
    woken, entry = parking.signal_agent(conn, "acct", "a", "go", {"v": 1}, 10)
    assert woken["id"] == "r1" and woken["status"] == "queued" and entry["entry"]["delivery"]["payload"] == {"v": 1}
    assert parking.signal_agent(conn, "acct", "a", "go", None, 11)[0]["id"] == "r2"
    assert parking.signal_agent(conn, "acct", "a", "go", None, 12) is None   # r3: another account; r4: agent b
    assert runs_q.get_run(conn, "r3")["status"] == runs_q.get_run(conn, "r4")["status"] == "waiting"
    assert parking.signal_agent(conn, "acct", "b", "go", None, 13)[0]["id"] == "r4"


async def test_a_webhook_triggers_wake_continuation_signals_the_parked_run(server):
    """A trigger's `wake` continuation is SignalRun's delivery: the webhook's firing wakes the
    account's run waiting for that signal, once; a second call finds nothing waiting."""
    import httpx

    from tests.triggers_helpers import create_trigger, firings_when, get_trigger

    kp, c, agent, session_id = await setup(server, "parked-wake")
    app = server.app
    run = await running_turn(app, session_id, agent["id"], agent["account"])
    await park_on_signal(app, run, agent, signal="deploy-done")
    trigger = await create_trigger(c, kp, agent["id"], {"type": "webhook"}, name="deploy hook",
                                   continuation={"kind": "wake", "signal": "deploy-done"})
    hook = (await get_trigger(c, kp, trigger["id"]))["webhook"]
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(server.http_url + hook["path"], json={"build": 7},
                            headers={"Authorization": f"Bearer {hook['secret']}", "Idempotency-Key": "b7"})
        assert r.status_code == 202, r.text
        await wait_status(c, kp, run["id"], "succeeded")
        journal = await c.call(kp, {"_": "GetRunJournal", "runId": run["id"]})
        delivery = journal["entries"][-1]["entry"]["delivery"]
        assert delivery["source"] == "signal" and delivery["signal"] == "deploy-done", delivery
        again = await http.post(server.http_url + hook["path"], json={"build": 8},
                                headers={"Authorization": f"Bearer {hook['secret']}", "Idempotency-Key": "b8"})
        assert again.status_code == 202, again.text
    firings = await firings_when(c, kp, trigger["id"], lambda f: len(f) == 2)
    assert [f["status"] for f in firings] == ["created", "error"], firings
    assert "waiting for the signal 'deploy-done'" in firings[1]["error"]
    await c.close()

"""Reads off the loop against appends and revocations, over real sockets, on SQLite and
PostgreSQL (issue 39): Subscribe's access check, GetSession's read and a replay's pages are read
off the loop (`aread`, a reader thread on PostgreSQL), and what the live contract promises must
hold across that await.

The race is injected deterministically: the storage's `aread` is wrapped so that, for the read
named, the other party's action runs *after* the read has taken its snapshot and *before* its
await returns (the worst moment, every time), as tests/server/live/test_server_replay_seam.py does
with fakes. The revocations: a collaborator removed, public read turned off, the session
deleted. What must be seen (CONTRACT section 5, "a subscriber that loses access stops receiving
at once"): a revocation that lands during the read wins: Subscribe and GetSession answer 404,
a replay ends with the `error` event naming its key, and not one event appended after the
revocation reaches the reader. An append that lands during the read is delivered once, with no
gap.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from seed_agents.clients.wire import decode_frame
from seed_agents.protocol.wire.capability import make_capability

from tests.conftest import running_server, server_config
from tests.waiting import until
from tests.wsraw import Party, V2Client, flatten, keypair, setup_session

pytestmark = pytest.mark.storages("sqlite", "postgresql")

OWNER, GUEST = keypair("race-owner"), keypair("race-guest")
REVOCATIONS = ("collaborator", "public-read", "session-deleted")


class Race:
    """Runs `act` once, inside the first `aread` (or `aread_each`: statements read in one round
    trip) of a function `match` accepts: after the read (its snapshot taken), before the reader
    gets its answer. `act` runs as a task of its own (the reader may be cancelled by it: a
    revocation ends a replay, a stop ends a turn)."""

    def __init__(self, db, match, act) -> None:
        self.db, self.match, self.act = db, match, act
        self.orig, self.orig_each = db.aread, db.aread_each
        self.fired = 0
        self.task: asyncio.Task | None = None
        db.aread = self.aread
        db.aread_each = self.aread_each

    async def aread(self, fn, *args, **kw):
        return await self._after(fn, await self.orig(fn, *args, **kw))

    async def aread_each(self, fn, *args, **kw):   # (kw: a read's replay claim, PostgreSQL)
        return await self._after(fn, await self.orig_each(fn, *args, **kw))

    async def _after(self, fn, value):
        if not self.fired and self.match(fn):
            self.fired += 1
            self.task = asyncio.ensure_future(self.act())
            await asyncio.shield(self.task)
        return value

    async def wait(self, timeout: float = 20) -> None:
        """Until it has fired and its action is done (its failure raised here)."""
        await until(lambda: self.task is not None, timeout, what="the race to fire")
        await asyncio.wait_for(asyncio.shield(self.task), timeout)

    def undo(self) -> None:
        self.db.aread, self.db.aread_each = self.orig, self.orig_each


def named(*names):
    return lambda fn: getattr(fn, "__qualname__", "") in names


@pytest.fixture
async def small_pages(tmp_path, storage, request):
    """A server whose replay reads 2 events a page, so a replay is many reads."""
    async with running_server(server_config(tmp_path, storage, request, replay_page=2)) as running:
        yield running


async def world(server, revocation: str):
    """An owner's echo agent and session with two turns in it, and a guest that may read it by
    the way `revocation` takes back (a reader's grant, or public read)."""
    o = Party(OWNER, await V2Client.open(server.url))
    g = Party(GUEST, await V2Client.open(server.url))
    agent_id, session_id = await setup_session(o.client, OWNER)
    await o.ok({"_": "Subscribe", "key": "sessions/" + session_id})
    for i in range(2):
        await turn(o, session_id, f"before {i}")
    if revocation == "public-read":
        await o.ok({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": True})
    else:
        await o.ok({"_": "InviteAgentCollaborator", "agentId": agent_id, "accountId": GUEST.account_id,
                    "role": "reader"})
        await g.ok({"_": "AcceptAgentInvite", "agentId": agent_id})
    return o, g, agent_id, session_id


async def turn(o: Party, session_id: str, text: str) -> dict:
    """A message and its echo reply, both stored (seen on the owner's subscription)."""
    sent = await o.ok({"_": "MessageSession", "sessionId": session_id,
                       "content": [{"type": "text", "text": text}]})
    await o.wait_for(lambda e: e["_"] == "append" and e.get("key") == "sessions/" + session_id
                     and any(x["event"].get("content") == "echo: " + text for x in flatten(e)), timeout=20)
    return sent


def revoke(o: Party, agent_id: str, session_id: str, revocation: str, after: list):
    """The revocation, then (unless the session went) a turn appended after it, whose text is
    noted in `after`: the guest must never see it."""
    async def act():
        if revocation == "collaborator":
            await o.ok({"_": "RemoveAgentCollaborator", "agentId": agent_id, "accountId": GUEST.account_id})
        elif revocation == "public-read":
            await o.ok({"_": "SetAgentPublicRead", "agentId": agent_id, "publicRead": False})
        else:
            await o.ok({"_": "DeleteSession", "sessionId": session_id})
            return
        after.append("after the revocation")
        await turn(o, session_id, after[-1])
    return act


async def quiet_since(g: Party, after: list, received: list) -> None:
    """Nothing more is on its way to the guest (a round trip on its socket), and none of what
    it received is an event appended after the revocation."""
    await g.client.answer_is_next_frame(GUEST)
    texts = [str(x["event"].get("content")) for e in received for x in flatten(e)]
    for text in after:
        assert not any(text in t for t in texts), (text, texts)


async def close(*parties) -> None:
    for p in parties:
        await p.client.close()


@pytest.mark.parametrize(("kind", "revocation"), [("sessions", r) for r in REVOCATIONS]
                         + [("agents", "collaborator"), ("agents", "public-read")])   # (names no session)
async def test_a_revocation_during_subscribes_check_wins(server, revocation, kind):
    o, g, agent_id, session_id = await world(server, revocation)
    after: list = []
    race = Race(server.app.db, named("key_role"), revoke(o, agent_id, session_id, revocation, after))
    try:
        key = f"{kind}/" + (session_id if kind == "sessions" else agent_id)
        got = await g.call({"_": "Subscribe", "key": key})
        assert race.fired == 1
        assert got["_"] == "Error" and got["status"] == 404, got
        if revocation != "session-deleted":
            assert after   # a turn was appended after the revocation, while Subscribe awaited
            await turn(o, session_id, "later")
            after.append("later")
        received = []
        while not g.client.events.empty():
            received.append(g.client.events.get_nowait())
        await quiet_since(g, after, received)
        assert not any(e.get("key") == key for e in received), received
    finally:
        race.undo()
        await close(o, g)


@pytest.mark.parametrize("revocation", REVOCATIONS)
async def test_a_revocation_during_get_session_wins(server, revocation):
    o, g, agent_id, session_id = await world(server, revocation)
    assert (await g.ok({"_": "GetSession", "sessionId": session_id}))["session"]["id"] == session_id
    after: list = []
    race = Race(server.app.db, named("session_reads", "session_reads_together", "statements"),
                revoke(o, agent_id, session_id, revocation, after))
    try:
        got = await g.call({"_": "GetSession", "sessionId": session_id})
        assert race.fired == 1
        assert got["_"] == "Error" and got["status"] == 404, got
        assert (await g.call({"_": "GetSession", "sessionId": session_id}))["status"] == 404
    finally:
        race.undo()
        await close(o, g)


@pytest.mark.parametrize("revocation", REVOCATIONS)
async def test_a_revocation_during_a_replay_ends_it(small_pages, storage, revocation):
    """The guest subscribes from seq 0; the revocation lands while a replay page is read (on
    PostgreSQL off the loop; on SQLite a replay reads on the loop, so there it lands inside the
    first read that awaits: the guest's next action's). Its subscription ends with the error
    (a deletion: the deletion notice), and nothing appended after the revocation reaches it."""
    server = small_pages
    o, g, agent_id, session_id = await world(server, revocation)
    for i in range(3):
        await turn(o, session_id, f"more {i}")
    after: list = []
    act = revoke(o, agent_id, session_id, revocation, after)
    key = "sessions/" + session_id
    race = Race(server.app.db, named("event_bodies_page", "invites_of"), act)
    try:
        await g.ok({"_": "Subscribe", "key": key, "afterSeq": 0})
        if storage == "sqlite":   # the replay never awaits a read there: the race goes to this one
            await g.ok({"_": "ListAgentInvites"})
        await race.wait()

        def ended(e):
            if e.get("key") != key:
                return False
            if revocation == "session-deleted":
                return e["_"] == "change" and e["value"].get("reason") == "session-deleted"
            return e["_"] == "error" and e["status"] == 404

        received = []
        end = await g.wait_for(lambda e: received.append(e) or ended(e), timeout=20)
        assert end in received
        if revocation != "session-deleted":
            await turn(o, session_id, "later")
            after.append("later")
        await quiet_since(g, after, received)
        seqs = [x["seq"] for e in received for x in flatten(e)]
        assert seqs == list(range(1, len(seqs) + 1)), seqs   # what was sent, in order, once
    finally:
        race.undo()
        await close(o, g)


@pytest.mark.parametrize("where", ["check", "replay"])
async def test_appends_during_subscribe_reads_arrive_once_without_gap(small_pages, storage, where):
    """Turns appended while Subscribe's check is read, or while a replay page is read: the
    subscriber gets every event once, in seq order, replay then live."""
    server = small_pages
    o, g, agent_id, session_id = await world(server, "collaborator")
    texts = [f"during {i}" for i in range(3)]

    async def act():
        for t in texts:
            await turn(o, session_id, t)

    match = named("key_role") if where == "check" else named("event_bodies_page")
    race = Race(server.app.db, match, act)
    key = "sessions/" + session_id
    try:
        await g.ok({"_": "Subscribe", "key": key, "afterSeq": 0})
        if where == "replay" and storage == "sqlite":
            assert race.fired == 0   # replay pages are read on the loop there: nothing to race
            race.match = named("invites_of")
            await g.ok({"_": "ListAgentInvites"})   # the turns land inside this read instead
        await race.wait()
        await turn(o, session_id, "after")
        stored = await o.ok({"_": "GetSession", "sessionId": session_id})
        assert "nextAfterSeq" not in stored
        last = stored["events"][-1]["seq"]
        seqs: list[int] = []
        while not seqs or seqs[-1] < last:
            e = await g.wait_for(lambda e: e.get("key") == key and e["_"] == "append", timeout=20)
            seqs += [x["seq"] for x in flatten(e)]
        assert seqs == list(range(1, last + 1)), seqs
        await g.ok({"_": "ListAgentInvites"})   # a round trip: anything queued before it is here
        while not g.client.events.empty():
            assert not flatten(g.client.events.get_nowait())   # no append sent twice
    finally:
        race.undo()
        await close(o, g)


@pytest.mark.parametrize("ending", ["stop", "delete"])
async def test_a_turn_whose_session_ends_during_its_start_reads_writes_nothing(server, ending):
    """A turn's own rows are read off the loop before its first model step (server/runtime/
    runner.py, `_turn_statements`). A StopSession or DeleteSession landing during that read wins: no
    reply is stored or sent, the run ends canceled (or goes with its session), and the next turn
    is answered."""
    o = Party(OWNER, await V2Client.open(server.url))
    agent_id, session_id = await setup_session(o.client, OWNER)
    key = "sessions/" + session_id
    await o.ok({"_": "Subscribe", "key": key})

    async def act():
        if ending == "stop":
            got = await o.ok({"_": "StopSession", "sessionId": session_id})
            assert got["stopped"] is True
        else:
            await o.ok({"_": "DeleteSession", "sessionId": session_id})

    race = Race(server.app.db, named("_turn_statements"), act)
    try:
        sent = await o.ok({"_": "MessageSession", "sessionId": session_id,
                           "content": [{"type": "text", "text": "raced"}]})
        await race.wait()
        await o.wait_for(lambda e: e["_"] == "change" and e.get("key") == key
                         and (e["value"].get("status") == "idle" or e["value"].get("reason") == "session-deleted"), timeout=20)
        if ending == "stop":
            got = await o.ok({"_": "GetRun", "runId": sent["runId"]})
            assert got["run"]["status"] == "canceled", got
            stored = await o.ok({"_": "GetSession", "sessionId": session_id})
            assert not any(e["event"].get("role") == "assistant" for e in stored["events"]), stored["events"]
        else:
            gone = await o.call({"_": "GetSession", "sessionId": session_id})
            assert gone.get("status") == 404, gone
        race.undo()
        _agent, other = await setup_session(o.client, OWNER)
        await o.ok({"_": "Subscribe", "key": "sessions/" + other})
        await turn(o, other, "next")   # the server goes on answering
    finally:
        race.undo()
        await close(o)


async def test_a_signer_unregistered_during_subscribes_check_gets_nothing(server):
    """A device key acting for the owner subscribes; the account takes the key back while the
    check is read. The device's socket closes (1008) and not one event of the session, nor the
    subscription's answer, reaches it; the hub keeps no subscription of that socket."""
    device_kp = keypair("race-device")
    o = Party(OWNER, await V2Client.open(server.url))
    device = await V2Client.open(server.url)
    agent_id, session_id = await setup_session(o.client, OWNER)
    key = "sessions/" + session_id
    await o.ok({"_": "Subscribe", "key": key})
    blob = make_capability(OWNER, device_kp.principal, "AGENT", time.time_ns() // 1_000_000)
    assert (await device.call(device_kp, {"_": "RegisterSigner", "capability": blob}))["_"] == "RegisterSignerResponse"
    assert (await device.call(device_kp, {"_": "ListAgents"}, account=OWNER.principal))["_"] == "ListAgentsResponse"
    after: list = []

    async def act():
        await o.ok({"_": "UnregisterSigner", "signerId": device_kp.account_id})
        after.append("after the key went")
        await turn(o, session_id, after[-1])

    race = Race(server.app.db, named("key_role"), act)
    try:
        frames_before = len(device.frames)
        subscribing = asyncio.ensure_future(device.call(device_kp, {"_": "Subscribe", "key": key},
                                                        account=OWNER.principal))
        await race.wait()
        await asyncio.wait_for(device.ws.wait_closed(), 10)
        assert device.ws.close_code == 1008 and "unregistered" in device.ws.close_reason
        got = [decode_frame(f) for f in device.frames[frames_before:]]
        assert not any(f.get("_") in ("append", "subscribed") or "Subscribe" in str(f.get("response", {}).get("_", ""))
                       for f in got), got
        subscribing.cancel()
        await asyncio.gather(subscribing, return_exceptions=True)
        conn_ids = {id(sub.conn) for sub in server.app.hub._by_key.get(key, ())}
        assert len(conn_ids) == 1   # the owner's alone
    finally:
        race.undo()
        await close(o)
        await device.close()

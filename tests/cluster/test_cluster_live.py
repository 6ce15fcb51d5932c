"""Live events across servers: several in-process servers on one PostgreSQL schema,
real clients on real sockets. A subscriber on one server sees what is written through another:
appends in seq order with no gap and no duplicate (joining at any afterSeq while others write,
and when two servers' notices arrive out of order), changes, account notices, deletions,
partials, revocations, and the system prompt an UpdateAgent elsewhere set; a lost LISTEN
connection is made good from the database.

Durable events are written here as a handler writes them (the store's append in one
transaction, then `app.broadcaster.publish_append` after the commit); a model turn end to end, leased by one
server and watched from another, is the last test.
"""
from __future__ import annotations

import asyncio
import random

import psycopg
import pytest

from seed_agents.server.clock import new_id
from seed_agents.server.main import start_server
from seed_agents.server.database.url import parse_storage_url
from seed_agents.server.store import collaborators as collab_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q

from tests.conftest import make_config
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.server.handlers.test_sharing_revocation import grant_read
from tests.waiting import until
from tests.wsraw import V2Client, flatten, keypair, setup_session

OWNER, GUEST = keypair("cluster-owner"), keypair("cluster-guest")


@pytest.fixture
async def cluster(tmp_path, postgres_url):  # noqa: F811  (the fixture above)
    """Three servers on one schema: PostgreSQL has no file lock, so they share one process.
    Run leases are long (renewed every 40 s), so a run stopped elsewhere can only be noticed
    in time through the relay's notice."""
    servers = []
    try:
        for name in ("a", "b", "c"):
            cfg = make_config(tmp_path / name, run_lease=120.0)
            cfg.storage_url = parse_storage_url(postgres_url)
            servers.append(await start_server(cfg))
        yield servers
    finally:
        for s in servers:
            await s.stop()


async def write_events(server, session_id: str, texts, *, publish: bool = True) -> list[dict]:
    """Append user messages through `server` as MessageSession does (without its run): each in
    its own transaction, published after its commit."""
    out = []
    for text in texts:
        now = server.app.now_ms()
        payload = {"role": "user", "content": text, "meta": {"accountId": OWNER.account_id}}
        event, body = await server.app.db.write(events_q.append_event, session_id, payload, new_id(), now)
        if publish:
            server.app.broadcaster.publish_append(session_id, event, body)
        out.append((event, body))
    return out


async def seqs_until(client: V2Client, last: int, timeout: float = 30) -> list[int]:
    """Every seq of the appends the client receives until it has seen `last`."""
    seqs: list[int] = []
    async with asyncio.timeout(timeout):
        while not seqs or seqs[-1] < last:
            seqs += [x["seq"] for x in flatten(await client.events.get())]
    return seqs


async def open_client(server) -> V2Client:
    return await V2Client.open(server.url)


def is_change(key: str, **fields):
    return lambda e: e["_"] == "change" and e["key"] == key and all(
        e["value"].get(k) == v for k, v in fields.items())


async def test_appends_written_on_other_servers_reach_subscribers_in_order(cluster):
    """Writers on B and C append to one session while subscribers on A and C join at several
    afterSeq values: each ends with exactly the seqs past its afterSeq, once each, in order."""
    a, b, c = cluster
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    key = "sessions/" + session_id
    per_writer = 40
    total = 2 * per_writer

    async def write(server, tag):
        for i in range(per_writer):
            await write_events(server, session_id, [f"{tag}{i}"])
            if i % 5 == 0:
                await asyncio.sleep(0)   # let subscribers join between writes

    async def subscriber(server, after_seq, wait_for_seq):
        async def written() -> bool:
            return await b.app.db.aread(events_q.last_seq, session_id, large=True) >= wait_for_seq

        await until(written, 10, step=0.005, what=f"seq {wait_for_seq} written")
        client = await open_client(server)
        got = await client.call(OWNER, {"_": "Subscribe", "key": key, "afterSeq": after_seq})
        assert got["_"] == "SubscribeResponse", got
        seqs = await seqs_until(client, total)
        await client.close()
        return after_seq, seqs

    plans = [(a, 0, 0), (a, 0, 10), (c, 3, 20), (a, 10, 30), (c, 25, 45), (a, 40, 60), (a, 70, 75)]
    results = await asyncio.gather(write(b, "b"), write(c, "c"),
                                   *(subscriber(s, after, when) for s, after, when in plans))
    for after_seq, seqs in results[2:]:
        assert seqs == list(range(after_seq + 1, total + 1)), (after_seq, seqs)
    await writer.close()


async def test_out_of_order_notices_from_two_servers_give_each_seq_once(cluster):
    """Seq 6 (from C) is announced before seq 5 (from B): A's subscriber fills 5 from the
    database when 6 arrives, and drops B's late notice of 5."""
    a, b, c = cluster
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    await write_events(b, session_id, ["1", "2", "3", "4"])
    sub = await open_client(a)
    await sub.call(OWNER, {"_": "Subscribe", "key": "sessions/" + session_id, "afterSeq": 2})
    assert await seqs_until(sub, 4) == [3, 4]
    (five, five_body), = await write_events(b, session_id, ["5"], publish=False)   # committed, not yet announced
    await write_events(c, session_id, ["6"])
    assert await seqs_until(sub, 6) == [5, 6]
    b.app.broadcaster.publish_append(session_id, five, five_body)   # B's notice of 5, late
    await write_events(c, session_id, ["7"])
    assert await seqs_until(sub, 7) == [7]
    await writer.close()
    await sub.close()


async def test_changes_notices_and_deletion_reach_other_servers(cluster):
    a, b, _c = cluster
    writer = await open_client(b)
    watcher = await open_client(a)
    await watcher.call(OWNER, {"_": "Subscribe", "key": "account/" + OWNER.account_id})
    agent_id, session_id = await setup_session(writer, OWNER)
    created = await watcher.event_where(is_change("account/" + OWNER.account_id, reason="session-created"), 15)
    assert created["value"] == {"reason": "session-created", "agentId": agent_id, "sessionId": session_id}
    key = "sessions/" + session_id
    await watcher.call(OWNER, {"_": "Subscribe", "key": key})
    await watcher.call(OWNER, {"_": "Subscribe", "key": "agents/" + agent_id})
    await watcher.event_where(is_change(key), 15)   # the current value, first
    r = await writer.call(OWNER, {"_": "UpdateSession", "sessionId": session_id, "title": "Plans"})
    assert r["_"] == "UpdateSessionResponse", r
    await watcher.event_where(is_change(key, title="Plans"), 15)
    await watcher.event_where(is_change("account/" + OWNER.account_id, reason="session-updated"), 15)
    r = await writer.call(OWNER, {"_": "UpdateAgent", "agentId": agent_id, "definition": {
        "name": "Renamed", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}})
    assert r["_"] == "GetAgentResponse", r
    changed = await watcher.event_where(lambda e: e["_"] == "change" and e["key"] == "agents/" + agent_id
                                        and e["value"].get("definition", {}).get("name") == "Renamed", 15)
    assert changed["value"]["accessRole"] == "owner"
    r = await writer.call(OWNER, {"_": "DeleteSession", "sessionId": session_id})
    assert r["_"] == "DeleteSessionResponse", r
    gone = await watcher.event_where(is_change(key, reason="session-deleted"), 15)
    assert gone["value"] == {"reason": "session-deleted", "agentId": agent_id, "sessionId": session_id}
    await watcher.event_where(is_change("account/" + OWNER.account_id, reason="session-deleted"), 15)
    # Nothing of the deleted session reaches A afterwards: the marker's answer comes with no
    # event of that key before it.
    await watcher.call(OWNER, {"_": "ListAgents"})
    while not watcher.events.empty():
        assert watcher.events.get_nowait().get("key") != key
    await writer.close()
    await watcher.close()


async def test_update_agent_elsewhere_changes_the_system_prompt_here(cluster):
    a, b, _c = cluster
    writer = await open_client(b)
    reader = await open_client(a)
    agent_id, session_id = await setup_session(writer, OWNER)
    got = await reader.call(OWNER, {"_": "GetSession", "sessionId": session_id})
    assert got["systemPromptMarkdown"] == "be brief"   # now cached on A
    await reader.call(OWNER, {"_": "Subscribe", "key": "agents/" + agent_id})
    await writer.call(OWNER, {"_": "UpdateAgent", "agentId": agent_id, "definition": {
        "name": "Echo", "systemPrompt": "be thorough", "modelProvider": "echo", "model": "echo-1"}})
    await reader.event_where(lambda e: e["_"] == "change" and e["key"] == "agents/" + agent_id
                             and e["value"].get("definition", {}).get("systemPrompt") == "be thorough", 15)
    got = await reader.call(OWNER, {"_": "GetSession", "sessionId": session_id})
    assert got["systemPromptMarkdown"] == "be thorough"
    await writer.close()
    await reader.close()


@pytest.mark.parametrize("how", ["remove", "public-read-off"])
async def test_access_removed_on_one_server_ends_subscriptions_on_another(cluster, how):
    a, b, _c = cluster
    owner = await open_client(b)
    guest = await open_client(a)
    agent_id, session_id = await setup_session(owner, OWNER)
    revoke = await grant_read(owner, OWNER, guest, GUEST, agent_id, how)
    keys = ["sessions/" + session_id, "agents/" + agent_id]
    for key in keys:
        got = await guest.call(GUEST, {"_": "Subscribe", "key": key})
        assert got["_"] == "SubscribeResponse", got
    await write_events(b, session_id, ["before"])
    await guest.event_where(lambda e: e["_"] == "append" and [x["seq"] for x in flatten(e)] == [1], 15)
    assert (await owner.call(OWNER, revoke))["_"] == revoke["_"] + "Response"
    ended = set()
    while ended != set(keys):
        e = await guest.event_where(lambda e: e["_"] in ("error", "append"), 15)
        assert e["_"] == "error", e   # no event of the agent before its subscriptions end
        assert e["status"] == 404
        ended.add(e["key"])
    await write_events(b, session_id, ["after"])
    await write_events(a, session_id, ["after, here"])
    marker = await guest.call(GUEST, {"_": "ListAgentInvites"})
    assert marker["_"] == "ListAgentInvitesResponse"
    while not guest.events.empty():
        assert guest.events.get_nowait().get("key") not in keys
    await owner.close()
    await guest.close()


async def test_partials_published_on_one_server_reach_another(cluster):
    """The relay's own contract for partials (what a turn streaming on B publishes): they
    travel in the notice, in order with the appends; one too large for a notice is dropped
    and counted, and the durable event still arrives."""
    a, b, _c = cluster
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    sub = await open_client(a)
    await sub.call(OWNER, {"_": "Subscribe", "key": "sessions/" + session_id})
    # Partials reach a subscription once its replay has ended (during it, what is live is read
    # back from the database instead, and a partial is never stored): wait for that marker.
    await sub.event_where(lambda e: e["_"] == "replayed", 15)
    (event, body), = await write_events(b, session_id, ["question"])
    for word in ("echo: ", "question"):
        b.app.broadcaster.publish_partial(session_id, "run-1", {"textDelta": word})
    b.app.broadcaster.publish_partial(session_id, "run-1", {"textDelta": "x" * 9000})   # too large: dropped
    b.app.broadcaster.publish_partial(session_id, "run-1", {"done": True})
    await write_events(b, session_id, ["answer"])
    got = []
    async with asyncio.timeout(15):
        while not any(x["seq"] == 2 for e in got for x in flatten(e)):
            got.append(await sub.events.get())
    seen = [(e["_"], e.get("patch") or [x["seq"] for x in flatten(e)]) for e in got
            if e["_"] in ("append", "appendPartial")]
    assert seen == [("append", [1]), ("appendPartial", {"textDelta": "echo: "}),
                    ("appendPartial", {"textDelta": "question"}), ("appendPartial", {"done": True}),
                    ("append", [2])], seen
    assert all(e["partialId"] == "run-1" for e in got if e["_"] == "appendPartial")
    assert b.app.cluster.dropped_partials == 1
    await writer.close()
    await sub.close()


async def test_lost_listen_connection_is_made_good_from_the_database(cluster, postgres_base_url):  # noqa: F811
    """A killed LISTEN connection: A reconnects and fills from the database what its subscribers
    missed (here: writes whose notices A never heard), then receives live again; killed once
    more while B writes, A's subscriber still gets every seq."""
    a, b, _c = cluster
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    sub = await open_client(a)
    await sub.call(OWNER, {"_": "Subscribe", "key": "sessions/" + session_id})
    await write_events(b, session_id, ["1", "2"])
    assert await seqs_until(sub, 2) == [1, 2]
    bus = a.app.cluster.bus

    def kill_listener() -> int:
        pid = bus.listener_pid
        with psycopg.connect(postgres_base_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return pid

    # Missed notices: only the re-read after the reconnect can deliver these.
    await write_events(b, session_id, [str(i) for i in range(3, 8)], publish=False)
    pid = kill_listener()
    assert await seqs_until(sub, 7) == list(range(3, 8))
    assert a.app.cluster.resyncs == 1 and bus.listener_pid != pid and bus.reconnects == 1
    await write_events(b, session_id, ["8"])   # live again
    assert await seqs_until(sub, 8) == [8]
    kill_listener()
    await write_events(b, session_id, [str(i) for i in range(9, 20)])   # while A reconnects
    assert await seqs_until(sub, 19) == list(range(9, 20))
    await until(lambda: a.app.cluster.resyncs >= 2, 15, step=0.01, what="the second resync")
    await writer.close()
    await sub.close()


async def test_resync_ends_what_was_deleted_or_revoked_while_not_listening(cluster, postgres_base_url):  # noqa: F811
    """Changes whose notices A never heard (committed on B without announcing them): after a
    lost LISTEN connection, A ends the subscriptions of a deleted session and of a guest whose
    access was removed, as the notices would have."""
    a, b, _c = cluster
    owner = await open_client(b)
    watcher = await open_client(a)
    guest = await open_client(a)
    agent_id, session_id = await setup_session(owner, OWNER)
    r = await owner.call(OWNER, {"_": "CreateSession", "agentId": agent_id})
    doomed = r["sessionId"]
    await owner.call(OWNER, {"_": "InviteAgentCollaborator", "agentId": agent_id,
                             "accountId": GUEST.account_id, "role": "reader"})
    await guest.call(GUEST, {"_": "AcceptAgentInvite", "agentId": agent_id})
    await guest.call(GUEST, {"_": "Subscribe", "key": "sessions/" + session_id})
    await watcher.call(OWNER, {"_": "Subscribe", "key": "sessions/" + doomed})
    await b.app.db.write(sessions_q.delete_session, doomed)
    await b.app.db.write(collab_q.remove, agent_id, GUEST.account_id)
    with psycopg.connect(postgres_base_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (a.app.cluster.bus.listener_pid,))
    gone = await watcher.event_where(is_change("sessions/" + doomed, reason="session-deleted"), 15)
    assert gone["value"] == {"reason": "session-deleted", "agentId": agent_id, "sessionId": doomed}
    ended = await guest.event_where(lambda e: e["_"] == "error", 15)
    assert ended["key"] == "sessions/" + session_id and ended["status"] == 404
    await owner.close()
    await watcher.close()
    await guest.close()


async def test_turn_run_on_another_server_streams_its_partials_here(cluster):
    a, b, _c = cluster
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    sub = await open_client(a)
    await sub.call(OWNER, {"_": "Subscribe", "key": "sessions/" + session_id})
    r = await writer.call(OWNER, {"_": "MessageSession", "sessionId": session_id,
                                  "content": [{"type": "text", "text": "hello there world"}]})
    assert r["_"] == "MessageSessionResponse", r
    got = []
    async with asyncio.timeout(30):
        while not any(x["event"].get("role") == "assistant" for e in got for x in flatten(e)):
            got.append(await sub.events.get())
    deltas = [e["patch"].get("textDelta", "") for e in got if e["_"] == "appendPartial"]
    assert "".join(deltas) == "echo: hello there world"
    assert [x["seq"] for e in got for x in flatten(e)] == [1, 2]
    await writer.close()
    await sub.close()


async def test_relay_orders_random_interleavings(cluster):
    """Random interleavings of announced and late notices from B and C: A's subscriber sees
    every seq once, in order."""
    a, b, c = cluster
    rng = random.Random(16)
    writer = await open_client(b)
    _agent_id, session_id = await setup_session(writer, OWNER)
    sub = await open_client(a)
    await sub.call(OWNER, {"_": "Subscribe", "key": "sessions/" + session_id})
    late = []
    for i in range(30):
        server = rng.choice((b, c))
        (event, body), = await write_events(server, session_id, [f"m{i}"], publish=False)
        if rng.random() < 0.3:
            late.append((server, event, body))
        else:
            server.app.broadcaster.publish_append(session_id, event, body)
        if late and rng.random() < 0.5:
            s, ev, bd = late.pop(rng.randrange(len(late)))
            s.app.broadcaster.publish_append(session_id, ev, bd)
    for s, ev, bd in late:
        s.app.broadcaster.publish_append(session_id, ev, bd)
    (last, _body), = await write_events(c, session_id, ["end"])
    assert await seqs_until(sub, last["seq"]) == list(range(1, last["seq"] + 1))
    await writer.close()
    await sub.close()


@pytest.mark.parametrize("how", ["StopSession", "CancelRun"])
async def test_stop_on_one_server_ends_the_turn_running_on_another(cluster, how):
    from tests.fakes.openai_server import FakeOpenAI, Script
    from tests.server.runtime.test_runtime_turns import provider_session

    async with FakeOpenAI(Script(first_delay=30)) as fake:
        clients = [await open_client(s) for s in cluster]
        _agent_id, session_id = await provider_session(clients[1], OWNER, fake)
        r = await clients[1].call(OWNER, {"_": "MessageSession", "sessionId": session_id,
                                          "content": [{"type": "text", "text": "slow"}]})
        run_id = r["runId"]
        await fake.wait_for_requests(1)
        running = next(i for i, s in enumerate(cluster) if session_id in s.app.runtime.workers)
        other = clients[(running + 1) % len(cluster)]
        action = ({"_": "StopSession", "sessionId": session_id} if how == "StopSession"
                  else {"_": "CancelRun", "runId": run_id})
        assert (await other.call(OWNER, action))["_"] == how + "Response"
        await fake.wait_for_disconnect(timeout=10)   # the turn on the other server was stopped
        got = await other.call(OWNER, {"_": "GetRun", "runId": run_id})
        assert got["run"]["status"] == "canceled"
        for c in clients:
            await c.close()

"""The storage port's conformance tests: the same tests against both drivers.

"Servers" are separate driver instances on one store: for PostgreSQL each has its own pool and
LISTEN connection, exactly as separate server processes would; for SQLite each has its own
Database (writer thread and connections) on one file. Run leases and notices are single-process
for SQLite (`shared_across_processes = False`), so there the "servers" of those tests share
one instance.
"""
from __future__ import annotations

import asyncio

import pytest

from server.storage import make_storage, parse_storage_url
from server.storage.port import IdempotencyConflict, LeaseLost, Notice
from server.storage.url import sqlite_url
from server.store.errors import NotFound
from server.store.gate import SchemaGateError
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

ACCOUNT = "z6MkAccount"
T0 = 1_700_000_000_000
WAIT = 10.0  # seconds a condition may take before the test fails


class Cluster:
    def __init__(self, kind: str, url) -> None:
        self.kind = kind
        self.url = url
        self.opened: list = []

    async def server(self):
        store = make_storage(self.url)
        await store.open()
        self.opened.append(store)
        return store

    async def servers(self, n: int, *, shared_state: bool = False) -> list:
        """n servers; with shared_state (leases, notices) SQLite gives one instance n times."""
        first = await self.server()
        if shared_state and not first.shared_across_processes:
            return [first] * n
        return [first] + [await self.server() for _ in range(n - 1)]

    async def close(self) -> None:
        for store in self.opened:
            await store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def cluster(request, tmp_path):
    if request.param == "sqlite":
        url = sqlite_url(str(tmp_path / "agents.sqlite"))
    else:
        url = parse_storage_url(request.getfixturevalue("postgres_url"))
    c = Cluster(request.param, url)
    try:
        yield c
    finally:
        await c.close()


async def seed(store, sessions=("s1",)) -> None:
    async def work(tx):
        await tx.ensure_account(ACCOUNT, T0)
        await tx.create_agent("a1", ACCOUNT, {"name": "agent"}, "/tmp/a1", T0)
        for sid in sessions:
            await tx.create_session(sid, ACCOUNT, "a1", None, T0)
    await store.transaction(work)


async def append(store, session_id: str, event_id: str, text: str = "hi") -> tuple[dict, bytes]:
    return await store.transaction(
        lambda tx: tx.append_event(session_id, {"type": "user", "text": text}, event_id, T0))


# -- sessions and events ---------------------------------------------------------------------
async def test_seq_is_dense_under_concurrent_writers_on_several_servers(cluster):
    servers = await cluster.servers(3)
    await seed(servers[0])
    per_server = 15
    results = await asyncio.gather(*(
        append(store, "s1", f"e{i}-{k}") for i, store in enumerate(servers) for k in range(per_server)))
    seqs = sorted(event["seq"] for event, _ in results)
    total = per_server * len(servers)
    assert seqs == list(range(1, total + 1))  # every acknowledged append, one seq each, no hole
    for store in servers:
        assert await store.last_seq("s1") == total
        rows, more = await store.event_page("s1", 0, 1000, 1 << 30)
        assert [seq for seq, _ in rows] == list(range(1, total + 1)) and not more
    by_seq = {event["seq"]: body for event, body in results}
    assert all(by_seq[seq] == body for seq, body in rows)  # the stored bytes are what append returned


async def test_a_rolled_back_append_gives_its_seq_back(cluster):
    store = await cluster.server()
    await seed(store)
    await append(store, "s1", "e1")

    async def fails(tx):
        await tx.append_event("s1", {"type": "user", "text": "lost"}, "e2", T0)
        raise RuntimeError("the action failed after appending")

    with pytest.raises(RuntimeError):
        await store.transaction(fails)
    event, _ = await append(store, "s1", "e3")
    assert event["seq"] == 2
    rows, _ = await store.event_page("s1", 0, 10, 1 << 20)
    assert [seq for seq, _ in rows] == [1, 2]


async def test_append_to_a_missing_session_is_not_found(cluster):
    store = await cluster.server()
    await seed(store)
    with pytest.raises(NotFound):
        await append(store, "nope", "e1")
    assert await store.get_session("nope") is None
    assert (await store.get_session("s1"))["status"] == "idle"


async def test_event_page_is_bounded_by_bytes_and_count(cluster):
    store = await cluster.server()
    await seed(store)
    for i in range(5):
        await append(store, "s1", f"e{i}", text="x" * 1000)
    rows, more = await store.event_page("s1", 0, 100, 2500)
    assert [seq for seq, _ in rows] == [1, 2] and more
    rows, more = await store.event_page("s1", 0, 100, 10)  # at least one row, however big
    assert [seq for seq, _ in rows] == [1] and more
    rows, more = await store.event_page("s1", 2, 2, 1 << 20)
    assert [seq for seq, _ in rows] == [3, 4] and more
    rows, more = await store.event_page("s1", 3, 100, 1 << 20)
    assert [seq for seq, _ in rows] == [4, 5] and not more


# -- idempotency -----------------------------------------------------------------------------
async def test_idempotency_race_across_servers_has_exactly_one_effect(cluster):
    servers = await cluster.servers(3)
    await seed(servers[0])

    async def effect(tx):
        event, _ = await tx.append_event("s1", {"type": "user", "text": "once"}, "ev-once", T0)
        return {"seq": event["seq"], "eventId": event["id"]}

    attempts = 12
    results = await asyncio.gather(*(
        servers[i % len(servers)].once(ACCOUNT, "MessageSession", "client-1", b"fp-1", T0, effect)
        for i in range(attempts)))
    assert sum(r.fresh for r in results) == 1
    assert all(r.response == {"seq": 1, "eventId": "ev-once"} for r in results)
    assert await servers[2].last_seq("s1") == 1

    with pytest.raises(IdempotencyConflict):
        await servers[1].once(ACCOUNT, "MessageSession", "client-1", b"fp-other", T0, effect)
    assert await servers[0].last_seq("s1") == 1
    # The key is (account, action, client id): another action with the same id is its own.
    other = await servers[0].once(ACCOUNT, "CreateSession", "client-1", b"fp-1", T0,
                                  lambda tx: tx.create_session("s2", ACCOUNT, "a1", None, T0))
    assert other.fresh and other.response["id"] == "s2"


async def test_a_failed_effect_records_nothing(cluster):
    store = await cluster.server()
    await seed(store)

    async def broken(tx):
        await tx.append_event("s1", {"type": "user", "text": "x"}, "ev-x", T0)
        raise RuntimeError("provider config invalid")

    with pytest.raises(RuntimeError):
        await store.once(ACCOUNT, "MessageSession", "client-2", b"fp", T0, broken)
    assert await store.last_seq("s1") == 0

    async def works(tx):
        event, _ = await tx.append_event("s1", {"type": "user", "text": "x"}, "ev-x", T0)
        return {"seq": event["seq"]}

    result = await store.once(ACCOUNT, "MessageSession", "client-2", b"fp", T0, works)
    assert result.fresh and result.response == {"seq": 1}


# -- replay signatures -----------------------------------------------------------------------
async def test_a_signature_is_claimed_once_across_servers(cluster):
    a, b = await cluster.servers(2)
    sig = bytes(range(64))
    claims = await asyncio.gather(*(s.claim_signature(sig, T0 + 60_000, T0) for s in (a, b, a, b)))
    assert sorted(claims) == [False, False, False, True]
    assert await b.claim_signature(sig, T0 + 60_000, T0 + 60_000) is False  # live through expires_at
    assert await b.claim_signature(sig, T0 + 200_000, T0 + 60_001) is True  # an expired claim is taken over
    assert await a.claim_signature(sig, T0 + 300_000, T0 + 100_000) is False
    other = b"\x01" * 64
    assert await a.claim_signature(other, T0 + 10, T0)
    assert await b.prune_signatures(T0 + 1_000) == 1
    assert await a.claim_signature(sig, T0, T0 + 150_000) is False  # the live one was kept


# -- runs: claim and lease -------------------------------------------------------------------
async def enqueue(store, run_id: str, session_id: str | None, now: int) -> dict:
    return await store.transaction(lambda tx: tx.enqueue_run(run_id, ACCOUNT, "a1", session_id, None, now))


async def test_two_claimers_never_get_the_same_run(cluster):
    a, b = await cluster.servers(2, shared_state=True)
    await seed(a, sessions=[f"s{i}" for i in range(8)])
    for i in range(8):
        await enqueue(a, f"r{i}", f"s{i}", T0 + i)
    claims = await asyncio.gather(*(s.claim_run(name, 30_000, T0 + 100)
                                    for s, name in [(a, "A"), (b, "B")] * 6))
    got = [c["id"] for c in claims if c is not None]
    assert len(got) == len(set(got)) == 8  # every queued run once, none twice
    assert sorted(got) == [f"r{i}" for i in range(8)]
    assert all(c["status"] == "running" and c["attempt"] == 1 for c in claims if c)
    assert await a.claim_run("A", 30_000, T0 + 100) is None


async def test_a_session_runs_its_queue_in_order_one_at_a_time(cluster):
    a, b = await cluster.servers(2, shared_state=True)
    await seed(a, sessions=["s1", "s2"])
    await enqueue(a, "r1", "s1", T0)
    await enqueue(a, "r2", "s1", T0)  # same millisecond: insertion order decides
    await enqueue(a, "r3", "s2", T0 + 1)
    first = await a.claim_run("A", 30_000, T0 + 10)
    second = await b.claim_run("B", 30_000, T0 + 10)
    assert (first["id"], second["id"]) == ("r1", "r3")
    assert first["account"] == ACCOUNT and first["leaseOwner"] == "A"
    assert await b.claim_run("B", 30_000, T0 + 10) is None  # r2 waits for r1
    await a.finish_run("r1", "A", "succeeded", None, T0 + 20)
    nxt = await b.claim_run("B", 30_000, T0 + 30)
    assert nxt["id"] == "r2" and nxt["leaseOwner"] == "B"


async def test_an_expired_lease_is_reclaimed_and_the_late_finish_refused(cluster):
    a, b = await cluster.servers(2, shared_state=True)
    await seed(a)
    await enqueue(a, "r1", "s1", T0)
    run = await a.claim_run("A", 1_000, T0)
    assert run["id"] == "r1" and run["leaseExpiresAt"] == T0 + 1_000
    assert await b.requeue_expired(T0 + 999) == []
    assert await a.renew_lease("r1", "A", 1_000, T0 + 900)  # now held until T0 + 1900
    assert await b.requeue_expired(T0 + 1_500) == []
    assert await b.requeue_expired(T0 + 1_901) == ["r1"]  # A died: its lease ran out
    assert (await b.get_run("r1"))["status"] == "queued"
    again = await b.claim_run("B", 1_000, T0 + 2_000)
    assert again["id"] == "r1" and again["attempt"] == 2
    assert not await a.renew_lease("r1", "A", 1_000, T0 + 2_001)
    with pytest.raises(LeaseLost):
        await a.finish_run("r1", "A", "succeeded", None, T0 + 2_002)
    done = await b.finish_run("r1", "B", "failed", {"code": "provider-error", "message": "provider said no"},
                              T0 + 2_003)
    assert done["status"] == "failed" and done["error"]["message"] == "provider said no"
    with pytest.raises(LeaseLost):  # answered exactly once
        await b.finish_run("r1", "B", "succeeded", None, T0 + 2_004)
    assert (await a.get_run("r1"))["status"] == "failed"
    with pytest.raises(NotFound):
        await a.finish_run("nope", "A", "succeeded", None, T0)


async def park(cluster, store, run_id: str, now: int) -> None:
    """running -> waiting, as a runtime parks a run (the port has no park call yet)."""
    if cluster.kind == "sqlite":
        from server.store import runs as runs_q

        await store.db.write(runs_q.set_run_status, run_id, "waiting", now)
    else:
        import psycopg

        with psycopg.connect(cluster.url.dsn(), autocommit=True) as conn:
            conn.execute("UPDATE runs SET status = 'waiting', lease_owner = NULL, lease_expires_at = NULL,"
                         " updated_at = %s WHERE id = %s", (now, run_id))


async def test_a_waiting_run_holds_no_lease_but_keeps_its_session_busy(cluster):
    a, b = await cluster.servers(2, shared_state=True)
    await seed(a)
    await enqueue(a, "r1", "s1", T0)
    await enqueue(a, "r2", "s1", T0 + 1)
    assert (await a.claim_run("A", 1_000, T0 + 10))["id"] == "r1"
    await park(cluster, a, "r1", T0 + 20)
    assert not await a.renew_lease("r1", "A", 1_000, T0 + 30)  # parked: nobody holds it
    assert await b.requeue_expired(T0 + 1_000_000) == []  # and no lease can run out
    assert await b.claim_run("B", 1_000, T0 + 40) is None  # r2 waits behind the parked r1
    assert (await a.get_run("r1"))["status"] == "waiting"
    with pytest.raises(LeaseLost):
        await a.finish_run("r1", "A", "succeeded", None, T0 + 50)


# -- the schema gate -------------------------------------------------------------------------
async def set_version(cluster, version: int) -> None:
    if cluster.kind == "sqlite":
        import apsw

        conn = apsw.Connection(cluster.url.path)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(cluster.url.dsn(), autocommit=True) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (version,))


async def make_foreign(cluster) -> None:
    if cluster.kind == "sqlite":
        import apsw

        conn = apsw.Connection(cluster.url.path)
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.close()
    else:
        import psycopg

        with psycopg.connect(cluster.url.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")


async def test_the_gate_creates_then_accepts_its_own_schema(cluster):
    store = await cluster.server()
    version = store.schema_version
    await seed(store)
    await store.close()
    cluster.opened.remove(store)
    again = await cluster.server()  # a second start on the same store: accepted, data kept
    assert again.schema_version == version
    assert (await again.get_agent("a1"))["definition"] == {"name": "agent"}


async def test_the_gate_refuses_a_newer_schema_naming_both_versions(cluster):
    store = await cluster.server()
    version = store.schema_version
    await seed(store)
    await store.close()
    cluster.opened.remove(store)
    await set_version(cluster, version + 5)
    with pytest.raises(SchemaGateError) as info:
        await cluster.server()
    err = info.value
    assert (err.found, err.expected, err.exit_code) == (version + 5, version, 2)
    assert str(version + 5) in str(err) and str(version) in str(err) and "newer" in str(err)
    await set_version(cluster, version)  # nothing else was changed: it opens again
    assert (await (await cluster.server()).get_session("s1"))["id"] == "s1"


async def test_the_gate_refuses_a_foreign_database(cluster):
    await make_foreign(cluster)
    with pytest.raises(SchemaGateError) as info:
        await cluster.server()
    assert info.value.exit_code == 2
    assert "schema version found" in str(info.value)


# -- the notice bus --------------------------------------------------------------------------
async def next_notice(sub):
    return await asyncio.wait_for(sub.get(), WAIT)


async def test_notices_reach_the_other_server_and_only_after_commit(cluster):
    a, b = await cluster.servers(2, shared_state=True)
    await seed(a)
    sub = await a.bus.subscribe()
    await b.bus.publish(Notice("accounts/z6MkAccount", {"kind": "partial", "text": "hel"}))
    assert await next_notice(sub) == Notice("accounts/z6MkAccount", {"kind": "partial", "text": "hel"})

    async def rolled_back(tx):
        await tx.append_event("s1", {"type": "user", "text": "x"}, "e-lost", T0)
        await tx.notify(Notice("sessions/s1", {"seq": 1, "lost": True}))
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        await b.transaction(rolled_back)

    async def committed(tx):
        event, _ = await tx.append_event("s1", {"type": "user", "text": "x"}, "e1", T0)
        await tx.notify(Notice("sessions/s1", {"seq": event["seq"]}))
        return event

    event = await b.transaction(committed)
    # The rolled-back notice never arrives: the first one on the topic is the committed one.
    assert await next_notice(sub) == Notice("sessions/s1", {"seq": event["seq"]})
    rows, _ = await a.event_page("s1", 0, 10, 1 << 20)  # the subscriber reads the event back
    assert [seq for seq, _ in rows] == [event["seq"]] == [1]
    await sub.close()


async def test_an_oversized_notice_is_refused(cluster):
    store = await cluster.server()
    with pytest.raises(ValueError, match="limit"):
        await store.bus.publish(Notice("sessions/s1", {"text": "x" * 10_000}))


async def test_servers_draining_the_queue_run_each_session_in_order_and_each_run_once(cluster):
    servers = await cluster.servers(3, shared_state=True)
    sessions = ["s1", "s2", "s3"]
    await seed(servers[0], sessions=sessions)
    expected = {sid: [] for sid in sessions}
    for i in range(18):
        # A session's runs side by side in the queue, so a claimer that ignored the session's
        # order would take its second run while the first is still running.
        sid = sessions[(i // 2) % 3]
        await enqueue(servers[0], f"r{i:02d}", sid, T0 + i // 4)  # ties in created_at, too
        expected[sid].append(f"r{i:02d}")
    finished: dict[str, list[str]] = {sid: [] for sid in sessions}
    running: set[str] = set()
    clock = T0 + 100

    async def worker(store, name: str) -> None:
        idle = 0
        while idle < 3:  # bounded: stop once three claims in a row find nothing
            run = await store.claim_run(name, 60_000, clock)
            if run is None:
                idle += 1
                await asyncio.sleep(0)  # let the other servers finish what they hold
                continue
            idle = 0
            sid = run["sessionId"]
            assert sid not in running, f"two runs of {sid} running at once"
            running.add(sid)
            await store.finish_run(run["id"], name, "succeeded", None, clock)
            running.discard(sid)  # only now may another run of the session be claimed
            finished[sid].append(run["id"])

    for _ in range(10):  # until every run is done (each round is bounded)
        await asyncio.gather(*(worker(s, f"srv{i}") for i, s in enumerate(servers)))
        if sum(map(len, finished.values())) == 18:
            break
    assert finished == expected


# -- the same shapes from both drivers -------------------------------------------------------
LEASE_KEYS = ("leaseOwner", "leaseExpiresAt", "userEventId", "modelOverride")


async def shape_script(store) -> list:
    """One sequence of port calls; every value they return, in order."""
    out: list = []

    async def setup(tx):
        await tx.ensure_account(ACCOUNT, T0)
        out.append(await tx.create_agent("a1", ACCOUNT, {"name": "agent"}, "/tmp/a1", T0))
        out.append(await tx.create_session("s1", ACCOUNT, "a1", "first", T0 + 1))
        out.append(await tx.create_session("s2", ACCOUNT, "a1", None, T0 + 2, parent_session_id="s1"))
        out.append(await tx.set_session_status("s2", "streaming", T0 + 3))

    await store.transaction(setup)
    payloads = [{"type": "message", "role": "user", "content": "hi"},
                {"type": "message", "role": "assistant", "content": "hello"},
                {"type": "tool", "name": "search"}]
    for i, payload in enumerate(payloads):
        out += await store.transaction(lambda tx, p=payload, i=i: tx.append_event("s1", p, f"e{i}", T0 + 10 + i))
    out += [await store.get_session("s1"), await store.get_session("s2"), await store.get_agent("a1")]
    root = await store.transaction(
        lambda tx: tx.enqueue_run("r1", ACCOUNT, "a1", "s1", "e0", T0 + 20, title="first"))
    child = await store.transaction(
        lambda tx: tx.enqueue_run("r2", ACCOUNT, "a1", "s2", None, T0 + 21, origin="agent", parent=root))
    out += [root, child, await store.get_agent("a1")]
    first = await store.claim_run("A", 30_000, T0 + 30)
    second = await store.claim_run("A", 30_000, T0 + 31)
    out += [first, second, await store.claim_run("A", 30_000, T0 + 32)]
    out.append(await store.renew_lease("r1", "A", 60_000, T0 + 33))
    out.append(await store.requeue_expired(T0 + 31 + 30_001))  # r2's lease ran out, r1's did not
    out += [await store.get_run("r2"), await store.claim_run("B", 30_000, T0 + 40_000)]
    error, usage = {"code": "provider-error", "message": "no"}, {"input": 3, "output": 4, "total": 7}
    out.append(await store.finish_run("r1", "A", "failed", error, T0 + 40_001, usage=usage))
    out.append(await store.finish_run("r2", "B", "succeeded", None, T0 + 40_002))
    out += [await store.get_run("r1"), await store.get_agent("a1"), await store.get_session("s1")]
    return out


async def test_both_drivers_return_the_same_shapes(tmp_path, postgres_url):
    from server.store import runs as runs_q

    lite = make_storage(sqlite_url(str(tmp_path / "agents.sqlite")))
    pg = make_storage(postgres_url)
    await lite.open()
    await pg.open()
    try:
        got_lite, got_pg = await shape_script(lite), await shape_script(pg)
    finally:
        await lite.close()
        await pg.close()
    for i, (a, b) in enumerate(zip(got_lite, got_pg)):
        assert a == b, f"step {i}: SQLite gave {a!r}, PostgreSQL gave {b!r}"
    assert len(got_lite) == len(got_pg)
    # Not both wrong the same way: what server.store itself would say.
    out = got_pg
    session, child, agent = out[10], out[11], out[12]
    assert session["activity"] == {"messageAt": T0 + 11, "messageFrom": "assistant"}
    assert session["childSessionCount"] == 1 and child["parentSessionId"] == "s1"
    assert agent["activity"] == {"at": T0 + 12, "kind": "tool", "sessionId": "s1",
                                 "messageAt": T0 + 11, "messageFrom": "assistant"}
    assert agent["busy"] is False and out[15]["busy"] is True and out[-2]["busy"] is False
    root, run_child, first = out[13], out[14], out[16]
    assert run_child["rootRunId"] == "r1" and run_child["parentRunId"] == "r1" and run_child["depth"] == 1
    assert first["userEventId"] == "e0" and first["startedAt"] == T0 + 30 and first["attempt"] == 1
    assert out[20] == ["r2"] and out[21]["status"] == "queued" and out[22]["attempt"] == 2
    claimed = {k: v for k, v in first.items() if k not in LEASE_KEYS}
    assert out[23] == runs_q.transition(claimed, "failed", T0 + 40_001,
                                        error={"code": "provider-error", "message": "no"},
                                        usage={"input": 3, "output": 4, "total": 7})
    assert out[24]["finishedAt"] == T0 + 40_002 and "error" not in out[24]

"""The store's conformance tests: the same tests on both drivers, through what the server uses.

The server reaches its store in one way, the storage port (server/database/port.py): the functions
of `seed_agents.server.store`, run through a façade, `db.write` / `db.read` / `db.aread`. `Database` runs them
on a SQLite file, `PgDatabase` on PostgreSQL (their SQL rewritten by
server/database/postgres/dialect.py). Each test here runs on every backend of `BACKENDS`
(parametrized), calling the real store functions (and handlers/idempotency.once, as the
handlers do).

"Servers" are separate façade instances on one store: for SQLite, several `Database` objects on
one file (each its own writer thread and connections, as separate processes would have); for
PostgreSQL, several `PgDatabase` objects on one schema (a fresh one per test, tests/pg.py).
"""
from __future__ import annotations

import asyncio
import hashlib

import pytest

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.server.handlers import idempotency as idem
from seed_agents.server.database import parse_storage_url
from seed_agents.server.database.errors import SchemaGateError
from seed_agents.server.database.workers import DatabaseClosed
from seed_agents.server.database.port import Conn
from seed_agents.server.store import accounts as accounts_q
from seed_agents.server.store import agent_lifecycle as lifecycle_q
from seed_agents.server.store import agent_listing as listing_q
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import attachments as attachments_q
from seed_agents.server.store import blobs as blobs_q
from seed_agents.server.store import codec, key_check
from seed_agents.server.store import collaborators as collab_q
from seed_agents.server.store import continuations as continuations_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import file_quota as file_quota_q
from seed_agents.server.store import history as history_q
from seed_agents.server.store import idempotency as idem_q
from seed_agents.server.store import drafts as drafts_q
from seed_agents.server.store import identities as identities_q
from seed_agents.server.store import publications as pub_q
from seed_agents.server.store import memory as memory_q
from seed_agents.server.store import owners as owners_q
from seed_agents.server.store import provider_removal as removal_q
from seed_agents.server.store import providers as providers_q
from seed_agents.server.store import roles as roles_q
from seed_agents.server.store import runs as runs_q
from seed_agents.server.store import secrets_table as secrets_q
from seed_agents.server.store import server_key as server_key_q
from seed_agents.server.store import sessions as sessions_q
from seed_agents.server.store import session_view
from seed_agents.server.store import signatures as sig_q
from seed_agents.server.store import turns as turns_q
from seed_agents.server.store import uploads as uploads_q
from seed_agents.server.store import visitors as visitors_q
from seed_agents.server.store.errors import NotFound
from seed_agents.server.store.secrets import SecretBox

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

ACCOUNT = "z6MkAccount"
GUEST = "z6MkGuest"
T0 = 1_700_000_000_000


class SqliteBackend:
    """The SQLite adapter as the tests drive it: where a test's store is, and the changes an
    operator could make behind the façade's back."""

    name = "sqlite"

    @staticmethod
    def where(request, tmp_path) -> str:
        return str(tmp_path / "agents.sqlite")

    @staticmethod
    def make(where: str):
        from seed_agents.server.database.sqlite.database import Database

        return Database(where)

    @staticmethod
    def run_sql(where: str, sql: str) -> None:
        import apsw

        conn = apsw.Connection(where)
        conn.execute(sql)
        conn.close()

    @classmethod
    def set_version(cls, where: str, version: int) -> None:
        cls.run_sql(where, f"PRAGMA user_version = {version}")


class PostgresBackend:
    name = "postgresql"

    @staticmethod
    def where(request, tmp_path) -> str:
        return request.getfixturevalue("postgres_url")   # a fresh schema per test (tests/pg.py)

    @staticmethod
    def make(where: str):
        from seed_agents.server.database.postgres.database import PgDatabase

        return PgDatabase(parse_storage_url(where))

    @staticmethod
    def run_sql(where: str, sql: str, params=()) -> None:
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute(sql, params)

    @classmethod
    def set_version(cls, where: str, version: int) -> None:
        cls.run_sql(where, "UPDATE schema_version SET version = %s", (version,))


# A third backend is its folder under server/database/ and one entry here.
BACKENDS = {backend.name: backend for backend in (SqliteBackend, PostgresBackend)}


class Stores:
    """Opens façade instances ("servers") on one store and closes them after the test."""

    def __init__(self, backend, where: str) -> None:
        self.backend = backend
        self.kind = backend.name
        self.where = where   # the SQLite file, or the PostgreSQL URL of the test's schema
        self.opened: list = []

    def make(self):
        return self.backend.make(self.where)

    async def open(self):
        db = self.make()
        await db.start()
        self.opened.append(db)
        return db

    async def open_many(self, n: int) -> list:
        return [await self.open() for _ in range(n)]

    async def close(self, db) -> None:
        self.opened.remove(db)
        await db.close()

    async def close_all(self) -> None:
        for db in list(self.opened):
            await self.close(db)

    # -- changes behind the façade's back, as an operator or another program would make them --
    def set_version(self, version: int) -> None:
        self.backend.set_version(self.where, version)

    def add_foreign_table(self) -> None:
        self.backend.run_sql(self.where, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")


@pytest.fixture(params=sorted(BACKENDS))
async def stores(request, tmp_path):
    backend = BACKENDS[request.param]
    s = Stores(backend, backend.where(request, tmp_path))
    try:
        yield s
    finally:
        await s.close_all()


async def test_each_backend_provides_the_port(stores):
    """Every member the storage port declares is there, and a store function's connection
    carries the adapter's traits (what queries read instead of asking which backend)."""
    db = await stores.open()
    for name in ("backend", "shared", "path", "traits", "schema_version", "start", "start_sync",
                 "close", "close_sync", "process_lock", "read", "aread", "write", "write_nowait", "write_sync",
                 "release_riders"):
        assert hasattr(db, name), name
    assert isinstance(db.schema_version, int) and db.schema_version > 0
    assert db.traits.name == db.backend == stores.kind
    assert db.shared == db.traits.run_leases   # several servers: runs leased (server/store/leases.py)
    conn_traits = db.read(lambda conn: (isinstance(conn, Conn), conn.traits))
    assert conn_traits == (True, db.traits)
    assert await db.aread(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1
    assert await db.aread(lambda conn: conn.execute("SELECT 2").fetchone()[0], large=True) == 2
    lock = db.process_lock()
    assert (lock is None) == db.shared


def _seed(conn, sessions) -> None:
    accounts_q.ensure_account(conn, ACCOUNT, T0)
    agents_q.create_agent(conn, "a1", ACCOUNT, {"name": "agent"}, "/tmp/a1", T0)
    for sid in sessions:
        sessions_q.create_session(conn, sid, ACCOUNT, "a1", None, T0)


async def seed(db, sessions=("s1",)) -> None:
    await db.write(_seed, sessions)


def user_message(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


# -- sessions and events ---------------------------------------------------------------------
async def test_seq_is_dense_and_unique_under_concurrent_appends_from_three_instances(stores):
    dbs = await stores.open_many(3)
    await seed(dbs[0])
    per_instance = 15
    results = await asyncio.gather(*(
        db.write(events_q.append_event, "s1", user_message(f"{i}-{k}"), f"e{i}-{k}", T0 + k)
        for i, db in enumerate(dbs) for k in range(per_instance)))
    total = per_instance * len(dbs)
    seqs = sorted(event["seq"] for event, _ in results)
    assert seqs == list(range(1, total + 1))   # every acknowledged append, one seq each, no hole
    by_seq = {event["seq"]: body for event, body in results}
    for db in dbs:
        assert db.read(events_q.last_seq, "s1") == total
        rows, more = await db.aread(events_q.event_bodies_page, "s1", 0, 1000, 1 << 30, large=True)
        assert [seq for seq, _ in rows] == list(range(1, total + 1)) and not more
        assert all(bytes(body) == by_seq[seq] for seq, body in rows)   # the bytes append returned
    session = dbs[1].read(sessions_q.get_session, "s1")
    assert session["activity"] == {"messageAt": T0 + per_instance - 1, "messageFrom": "user"}


async def test_a_rolled_back_append_gives_its_seq_back(stores):
    db = await stores.open()
    await seed(db)
    await db.write(events_q.append_event, "s1", user_message("one"), "e1", T0)

    def appends_then_fails(conn):
        events_q.append_event(conn, "s1", user_message("lost"), "e2", T0)
        raise RuntimeError("the action failed after appending")

    with pytest.raises(RuntimeError, match="after appending"):
        await db.write(appends_then_fails)
    event, _ = await db.write(events_q.append_event, "s1", user_message("two"), "e3", T0)
    assert event["seq"] == 2
    assert [e["id"] for e in db.read(events_q.events_after, "s1", 0, 10)] == ["e1", "e3"]
    assert db.read(events_q.event_seq, "e2") is None


async def test_append_to_a_missing_session_is_not_found_and_changes_nothing(stores):
    db = await stores.open()
    await seed(db)
    with pytest.raises(NotFound):
        await db.write(events_q.append_event, "nope", user_message("x"), "e1", T0)
    assert db.read(sessions_q.get_session, "nope") is None
    assert db.read(events_q.last_seq, "s1") == 0


async def test_the_event_page_is_bounded_by_bytes_and_count(stores):
    db = await stores.open()
    await seed(db)
    for i in range(5):
        await db.write(events_q.append_event, "s1", user_message("x" * 1000), f"e{i}", T0)

    async def page(after, limit, max_bytes):
        rows, more = await db.aread(events_q.event_bodies_page, "s1", after, limit, max_bytes, large=True)
        assert rows == db.read(events_q.event_bodies_page, "s1", after, limit, max_bytes)[0]
        return [seq for seq, _ in rows], more

    assert await page(0, 100, 2500) == ([1, 2], True)
    assert await page(0, 100, 10) == ([1], True)   # at least one row, however big
    assert await page(2, 2, 1 << 20) == ([3, 4], True)
    assert await page(3, 100, 1 << 20) == ([4, 5], False)
    assert await page(5, 100, 1 << 20) == ([], False)


async def test_an_event_over_the_bound_is_paged_as_its_stand_in(stores):
    """What an older server stored past today's bound comes in a replay page as its stand-in
    (the page reads seq and body alone; the stand-in's fields by one more lookup)."""
    db = await stores.open()
    await seed(db)
    for i in range(3):
        await db.write(events_q.append_event, "s1", user_message("y" * 3000 if i == 1 else "x" * 100), f"e{i}", T0 + i)
    for after, limit in ((0, 100), (1, 1), (0, 2)):
        rows, more = await db.aread(events_q.event_bodies_page, "s1", after, limit, 1 << 20, 2000, large=True)
        assert rows == db.read(events_q.event_bodies_page, "s1", after, limit, 1 << 20, 2000)[0]
        stored = db.read(events_q.event_bodies_after, "s1", after, limit, 2000)
        assert rows == stored and more == (after + limit < 3)   # the same stand-ins as every read
    rows, _ = db.read(events_q.event_bodies_page, "s1", 0, 100, 1 << 20, 2000)
    assert [len(body) < 2000 for _seq, body in rows] == [True, True, True]
    stand_in = codec.decode(rows[1][1])
    assert (stand_in["id"], stand_in["seq"], stand_in["createdAt"], stand_in["event"]["type"]) == ("e1", 2, T0 + 1, "error")
    assert "more than one answer carries (2000 bytes)" in stand_in["event"]["message"]


async def test_a_page_read_as_its_bodies_joined_is_the_page_or_nothing(stores):
    """v1's replay reads a page as one value (events_q.event_bodies_joined): the bodies of the
    page `event_bodies_page` reads, one after the other, in seq order; or None when that page
    is not plain (a stand-in in it, past its byte bound, a seq missing), for the row read."""
    db = await stores.open()
    await seed(db)
    for i in range(7):
        await db.write(events_q.append_event, "s1", user_message("x" * (100 + 37 * i)), f"e{i}", T0 + i)

    async def both(*args):
        joined = await db.aread(events_q.event_bodies_joined, "s1", *args, large=True)
        assert joined == db.read(events_q.event_bodies_joined, "s1", *args)
        return joined

    for after, limit in ((0, 100), (0, 7), (2, 3), (6, 5), (0, 1)):
        rows, _more = db.read(events_q.event_bodies_page, "s1", after, limit, 1 << 20)
        first, count, joined, more = await both(after, limit, 1 << 20)
        assert (first, count) == (after + 1, len(rows)) and type(joined) is bytes
        assert joined == b"".join(bytes(body) for _seq, body in rows)
        assert more == (count == limit)
    assert await both(7, 100, 1 << 20) == (8, 0, b"", False)
    assert await both(0, 100, 300) is None                      # past the byte bound: the row read stops there
    assert (await both(0, 1, 10))[1] == 1                        # one event, however big, as the row read
    assert await both(0, 100, 1 << 20, 250) is None             # a stand-in in it
    assert (await both(0, 2, 1 << 20, 250))[1] == 2             # (not in this one)

    def drop_one(conn):
        conn.execute("DELETE FROM session_events WHERE session_id = ? AND seq = ?", ("s1", 4))

    await db.write(drop_one)
    assert await both(0, 100, 1 << 20) is None                  # a seq missing
    assert (await both(4, 100, 1 << 20))[:2] == (5, 3)


# -- idempotency (handlers/idempotency.once, as MessageSession runs it) ----------------------
def message_effect(attempt: int, calls: list):
    def effect(conn):
        calls.append(attempt)
        event, _ = events_q.append_event(conn, "s1", user_message("once"), f"ev-{attempt}", T0)
        return {"seq": event["seq"], "eventId": event["id"]}, [event]
    return effect


async def test_an_idempotency_race_through_three_instances_has_one_effect_and_one_response(stores):
    dbs = await stores.open_many(3)
    await seed(dbs[0])
    calls: list[int] = []
    attempts = 12
    results = await asyncio.gather(*(
        dbs[i % 3].write(idem.once, ACCOUNT, "MessageSession", "client-1", b"fp-1", T0, message_effect(i, calls))
        for i in range(attempts)))
    fresh = [response for response, published in results if published]
    assert len(fresh) == 1   # one effect published
    assert all(response == fresh[0] for response, _ in results)   # one response, to every attempt
    assert fresh[0]["seq"] == 1
    for db in dbs:
        assert [e["id"] for e in db.read(events_q.events_after, "s1", 0, 10)] == [fresh[0]["eventId"]]
    # An effect that lost the race may have run (PostgreSQL: it ran, then its insert of the
    # record hit the winner's key and the job ran again, reading the record); none committed.
    assert len(calls) >= 1

    with pytest.raises(ProtocolError) as info:
        await dbs[1].write(idem.once, ACCOUNT, "MessageSession", "client-1", b"fp-other", T0,
                           message_effect(99, calls))
    assert info.value.status == 409 and "different request" in info.value.message
    assert dbs[2].read(events_q.last_seq, "s1") == 1
    # The key is (account, action, client id): another action with the same id is its own.
    response, published = await dbs[2].write(
        idem.once, ACCOUNT, "CreateSession", "client-1", b"fp-1", T0,
        lambda conn: (sessions_q.create_session(conn, "s2", ACCOUNT, "a1", None, T0), ["s2"]))
    assert response["id"] == "s2" and published == ["s2"]


async def test_a_failed_effect_records_nothing(stores):
    db = await stores.open()
    await seed(db)

    def broken(conn):
        events_q.append_event(conn, "s1", user_message("x"), "ev-x", T0)
        raise ProtocolError(400, "provider config invalid")

    with pytest.raises(ProtocolError):
        await db.write(idem.once, ACCOUNT, "MessageSession", "client-2", b"fp", T0, broken)
    assert db.read(events_q.last_seq, "s1") == 0
    assert db.read(idem_q.idem_get, ACCOUNT, "MessageSession", "client-2") is None
    calls: list[int] = []
    response, published = await db.write(idem.once, ACCOUNT, "MessageSession", "client-2", b"fp", T0,
                                         message_effect(1, calls))
    assert response == {"seq": 1, "eventId": "ev-1"} and published


# -- replay signatures -----------------------------------------------------------------------
async def test_a_signature_is_claimed_once_across_instances(stores):
    dbs = await stores.open_many(3)
    sig = bytes(range(64))
    claims = await asyncio.gather(*(db.write(sig_q.claim_signature, sig, T0 + 60_000, T0)
                                    for db in dbs * 3))
    assert sorted(claims) == [False] * 8 + [True]
    a, b, c = dbs
    assert await b.write(sig_q.claim_signature, sig, T0 + 60_000, T0 + 60_000) is False  # live through expires_at
    assert await c.write(sig_q.claim_signature, sig, T0 + 200_000, T0 + 60_001) is True  # expired: taken over
    assert await a.write(sig_q.claim_signature, sig, T0 + 300_000, T0 + 100_000) is False
    other = b"\x01" * 64
    assert await a.write(sig_q.claim_signature, other, T0 + 10, T0) is True
    assert sorted(b.read(sig_q.unexpired_signatures, T0 + 11)) == [(sig, T0 + 200_000)]
    assert await b.write(sig_q.prune_signatures, T0 + 1_000) == 1
    assert await a.write(sig_q.claim_signature, sig, T0, T0 + 150_000) is False  # the live one was kept


# -- riders: a write carried by the next job (write_nowait(ride=True)) -------------------------
def _claims(conn) -> list:
    return sorted(bytes(sig) for sig, _ in sig_q.unexpired_signatures(conn, T0))


async def test_a_rider_runs_just_before_the_next_job_in_its_transaction(stores):
    """What the replay guard's claim relies on: a rider is not queued on its own, and the next
    job submitted carries it: the job sees the rider's row, and both commit together."""
    db = await stores.open()
    sig = b"\x02" * 64
    db.write_nowait(sig_q.claim_signatures, [(sig, T0 + 60_000)], T0, ride=True)
    assert await db.write(_claims) == [sig]   # ran before the carrier, seen inside its transaction
    assert db.read(_claims) == [sig]
    jobs, batches = db.jobs, db.batches
    db.write_nowait(sig_q.claim_signatures, [(b"\x03" * 64, T0 + 60_000)], T0, ride=True)
    assert await db.write(_claims) == [sig, b"\x03" * 64]
    assert (db.jobs - jobs, db.batches - batches) == (2, 1)   # one batch, one commit


async def test_a_rider_nobody_carries_is_committed_once_released(stores):
    db = await stores.open()
    sig = b"\x04" * 64
    db.write_nowait(sig_q.claim_signatures, [(sig, T0 + 60_000)], T0, ride=True)
    db.release_riders()
    db.release_riders()   # nothing left: queues nothing
    assert await db.write(_claims) == [sig]
    other = await stores.open()   # committed: another instance sees it
    assert other.read(_claims) == [sig]


async def test_a_failing_rider_fails_alone_and_its_carrier_commits(stores, caplog):
    db = await stores.open()

    def broken(conn):
        conn.execute("INSERT INTO accepted_signatures (sig, expires_at) VALUES (?, ?)", (b"\x05" * 64, T0 + 60_000))
        raise ValueError("the rider fails")

    db.write_nowait(broken, ride=True)
    db.write_nowait(sig_q.claim_signatures, [(b"\x06" * 64, T0 + 60_000)], T0, ride=True)
    assert await db.write(_claims) == [b"\x06" * 64]   # the failed rider rolled back to its savepoint
    assert db.read(_claims) == [b"\x06" * 64]
    assert "background write broken failed" in caplog.text


async def test_riders_that_merge_run_as_one_job_before_the_first_carrier(stores):
    """The replay guard's claims riding on one batch's writes (write_nowait(merge=...)): one job,
    one row, run before the first of their carriers, so each carrier still finds its own claim."""
    import threading

    db = await stores.open()
    holding, release = threading.Event(), threading.Event()

    def hold(conn):   # keeps the writer busy until the jobs below are queued: they form one batch
        holding.set()
        assert release.wait(10)

    jobs, batches = db.jobs, db.batches
    held = asyncio.ensure_future(db.write(hold))
    assert await asyncio.to_thread(holding.wait, 10)
    sigs = [bytes([0x20 + i]) * 64 for i in range(3)]
    carriers = []
    for sig in sigs:
        db.write_nowait(sig_q.claim_signatures, [(sig, T0 + 60_000)], T0, ride=True, merge=sig_q.merged_claims)
        carriers.append(asyncio.ensure_future(db.write(_claims)))
        await asyncio.sleep(0)   # submitted: it carries the rider just queued
    release.set()
    await held
    assert await asyncio.gather(*carriers) == [sorted(sigs)] * 3   # all in, before the first carrier
    assert (db.jobs - jobs, db.batches - batches) == (1 + 1 + 3, 2)   # hold; the claims, the carriers
    assert db.read(lambda conn: conn.execute("SELECT count(*) FROM accepted_signature_sets").fetchone()[0]) == 1


async def test_riders_waiting_at_close_are_committed_then(stores):
    db = await stores.open()
    db.write_nowait(sig_q.claim_signatures, [(b"\x07" * 64, T0 + 60_000)], T0, ride=True)
    await stores.close(db)
    with pytest.raises(DatabaseClosed):
        db.write_nowait(sig_q.claim_signatures, [(b"\x08" * 64, T0 + 60_000)], T0, ride=True)
    again = await stores.open()
    assert again.read(_claims) == [b"\x07" * 64]


# -- group commit: a batch of jobs, one savepoint each ------------------------------------------
def _many_claims(conn, count: int, expires_at: int) -> None:
    conn.executemany("INSERT INTO accepted_signatures (sig, expires_at) VALUES (?, ?)",
                     [(hashlib.sha512(b"bulk %d" % i).digest(), expires_at) for i in range(count)])


async def test_a_job_with_a_large_journal_commits_in_a_batch_and_a_failing_one_rolls_back_alone(stores):
    """A job that changes thousands of rows already stored (its savepoint journal: megabytes,
    past any in-memory bound, spilled to a file on SQLite) commits in one batch with small jobs
    around it, and a large job that fails is undone alone: the rows it deleted are still there
    for the next job, and its neighbours commit."""
    import threading

    if stores.kind == "sqlite":
        from seed_agents.server.database.sqlite import gate
        assert gate.STATEMENT_JOURNAL_CONFIGURED   # the jobs below run with the server's setting
    db = await stores.open()
    bulk = 20_000   # ~2 MiB of rows and index
    await db.write(_many_claims, bulk, T0 + 10)
    small_a, small_b, lost = b"\x0a" * 64, b"\x0b" * 64, b"\x0c" * 64

    def deletes_everything_then_fails(conn):
        sig_q.claim_signature(conn, lost, T0 + 60_000, T0)
        assert sig_q.prune_signatures(conn, T0 + 1_000) == bulk
        raise ValueError("the large job fails")

    holding = threading.Event()
    release = threading.Event()

    def hold(conn):   # keeps the writer busy until the jobs below are queued: they form one batch
        holding.set()
        assert release.wait(10)

    batches = db.batches
    held = asyncio.ensure_future(db.write(hold))
    assert await asyncio.to_thread(holding.wait, 10)
    jobs = [asyncio.ensure_future(db.write(*call)) for call in (
        (sig_q.claim_signature, small_a, T0 + 60_000, T0),
        (deletes_everything_then_fails,),
        (sig_q.prune_signatures, T0 + 1_000),        # the large job that commits
        (sig_q.claim_signature, small_b, T0 + 60_000, T0),
    )]
    await asyncio.sleep(0)
    release.set()
    await held
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert results[0] is True and results[3] is True
    assert isinstance(results[1], ValueError)
    assert results[2] == bulk          # the failed job's deletions were undone before it ran
    assert db.batches - batches == 2   # the holding job's, then one for the four
    assert db.read(_claims) == [small_a, small_b]
    assert db.read(lambda conn: conn.execute("SELECT count(*) FROM accepted_signatures").fetchone()[0]) == 2


# -- the schema gate -------------------------------------------------------------------------
async def test_the_gate_creates_then_accepts_its_own_schema(stores):
    db = await stores.open()
    version = db.schema_version
    assert version > 0
    await seed(db)
    await stores.close(db)
    again = await stores.open()   # a second start on the same store: accepted, data kept
    assert again.schema_version == version
    assert again.read(agents_q.get_agent, "a1")["definition"] == {"name": "agent"}


async def test_the_gate_refuses_a_newer_schema_naming_both_versions(stores):
    db = await stores.open()
    version = db.schema_version
    await seed(db)
    await stores.close(db)
    stores.set_version(version + 5)
    with pytest.raises(SchemaGateError) as info:
        await stores.open()
    err = info.value
    assert (err.found, err.expected, err.exit_code) == (version + 5, version, 2)
    assert str(version + 5) in str(err) and str(version) in str(err) and "newer" in str(err)
    stores.set_version(version)   # nothing else was changed: it opens again, data kept
    assert (await stores.open()).read(sessions_q.get_session, "s1")["id"] == "s1"


async def test_the_gate_refuses_a_foreign_database(stores):
    stores.add_foreign_table()
    with pytest.raises(SchemaGateError) as info:
        await stores.open()
    assert info.value.exit_code == 2
    assert "schema version found" in str(info.value)


# -- the same shapes from both drivers -------------------------------------------------------
def store_name(fn) -> str:
    return f"{fn.__module__.rpartition('.')[2]}.{fn.__name__}"


async def shape_script(db, called: set[str] | None = None) -> list:
    """One sequence of store calls through the façade; every value they return, in order.
    The name of each store function called goes into `called`."""
    out: list = []
    called = set() if called is None else called

    async def w(fn, *args, **kw):
        called.add(store_name(fn))
        value = await db.write(lambda conn: fn(conn, *args, **kw))
        out.append(value)
        return value

    def r(fn, *args, **kw):
        called.add(store_name(fn))
        value = db.read(lambda conn: fn(conn, *args, **kw))
        out.append(value)
        return value

    # Accounts, signers, agents and sessions (a child, a user title, an automatic one).
    await w(accounts_q.ensure_account, ACCOUNT, T0)
    await w(accounts_q.hold_account, ACCOUNT, T0 + 5)   # (an existing row: kept as it was)
    await w(accounts_q.hold_account, "z6MkHeldOnly", T0)
    await w(accounts_q.add_signer, ACCOUNT, "z6MkSigner", "agent", "bafy-cid", b"\xa1\x01\x02", T0)
    r(accounts_q.is_signer, ACCOUNT, "z6MkSigner")
    await w(accounts_q.add_signer, ACCOUNT, "z6MkExpiring", "agent", None, b"\xa0", T0, T0 + 10)
    r(accounts_q.signer_expiry, ACCOUNT, "z6MkExpiring")
    r(accounts_q.is_signer, ACCOUNT, "z6MkExpiring", T0 + 10)   # expired at T0 + 10
    await w(accounts_q.remove_signer, ACCOUNT, "z6MkExpiring")
    await w(accounts_q.remove_signer, ACCOUNT, "z6MkExpiring")   # again: nothing to remove
    await w(agents_q.create_agent, "a1", ACCOUNT, {"name": "agent", "model": "m"}, "/tmp/a1", T0)
    await w(agents_q.create_agent, "a2", ACCOUNT, {"name": "second"}, "/tmp/a2", T0 + 1)
    await w(sessions_q.create_session, "s1", ACCOUNT, "a1", "first", T0 + 2)
    await w(sessions_q.create_session, "s2", ACCOUNT, "a1", None, T0 + 3, parent_session_id="s1")
    await w(sessions_q.create_session, "s3", ACCOUNT, "a2", None, T0 + 3)
    await w(sessions_q.set_session_status, "s2", "streaming", T0 + 4)
    await w(sessions_q.update_session, "s1", T0 + 5, title="renamed", set_override=True,
            model_override={"provider": "p", "model": "m2"})
    await w(sessions_q.auto_title, "s2", "auto", T0 + 6)
    await w(sessions_q.auto_title, "s1", "never replaces a user's title", T0 + 7)
    await w(sessions_q.apply_title, "s3", "From the model", "A description", T0 + 7)   # over a provisional title
    await w(sessions_q.apply_title, "s1", "never over a user's", "", T0 + 7)
    # Events and the activity rollup of sessions and agents.
    payloads = [user_message("hi"), {"type": "message", "role": "assistant", "content": "hello"},
                {"type": "tool", "name": "search"}, {"type": 7}]
    for i, payload in enumerate(payloads):
        await w(events_q.append_event, "s1", payload, f"e{i}", T0 + 10 + i)
    await w(events_q.append_event, "s3", user_message("other"), "e9", T0 + 9)   # older: no move back
    # An event over its bound is stored cut, its content whole as an attachment; an answer
    # bound below a stored event reads its stand-in, never its body.
    await w(events_q.append_event, "s3", {"type": "message", "role": "assistant", "content": "long " * 200},
            "e-long", T0 + 9, 400)
    called.add("large_events.spill")
    r(events_q.event_bodies_after, "s3", 0, 10, 300)
    r(sessions_q.get_session, "s1")
    r(sessions_q.get_session, "s2")
    r(agents_q.get_agent, "a1")
    r(sessions_q.session_ids_of_agent, "a1")
    r(sessions_q.child_session_ids, "s1")
    r(sessions_q.title_source, "s2")
    r(sessions_q.title_source, "no-such-session")
    r(runs_q.first_run_of_session, "s1")
    r(runs_q.first_run_of_session, "no-such-session")
    r(agents_q.list_agents, ACCOUNT)
    r(agents_q.list_agents_page, ACCOUNT, 1, None, 1 << 20)
    r(agents_q.list_agents_page, ACCOUNT, 5, {"updatedBefore": T0 + 1, "idAfter": "a1"}, 1 << 20)
    r(agents_q.definition_size, "a1")
    r(events_q.events_after, "s1", 1, 2)
    r(events_q.event_bodies_after, "s1", 2, 10)
    r(events_q.event_seq, "e1")
    r(events_q.holds_range, "s1", 1, 2)
    r(events_q.holds_range, "s1", 2, 99)
    # The chain (verifiable history): an event with its envelope, heads, a page of links; a link
    # cleared as a pre-chain database would have it, then linked again by the backfill.
    await w(events_q.append_event, "s1", user_message("signed"), "e5", T0 + 15, envelope=b"\xa1aa\x01")
    r(history_q.head_at, "s1")
    r(history_q.head_at, "s1", 2)
    r(history_q.chain_page, "s1", 0, 10, 1 << 20)
    r(history_q.chain_page, "s1", 1, 2, 100)
    await db.write(lambda conn: conn.execute("UPDATE session_events SET link = NULL WHERE session_id = 's1' AND seq >= 4"))
    await w(history_q.backfill, 10)
    await w(history_q.backfill, 10)   # nothing left: 0
    r(history_q.head_at, "s1")
    box = SecretBox(bytes(32))
    await w(server_key_q.load_or_create, box, bytes(range(32)))
    await w(server_key_q.load_or_create, box, bytes(32))   # the first one stays
    # Session lists: the account's, one agent's (paged), a session's children, top level only.
    first_page, cursor = r(sessions_q.list_sessions, ACCOUNT, "a1", 1, None)
    assert cursor is not None and len(first_page) == 1
    r(sessions_q.list_sessions, ACCOUNT, "a1", 1, cursor)
    r(sessions_q.list_sessions, ACCOUNT, None, 10, None)
    r(sessions_q.list_sessions, ACCOUNT, None, 10, None, parent_session_id="s1")
    r(sessions_q.list_sessions, ACCOUNT, "a1", 10, None, parent_session_id="s1")
    r(sessions_q.list_sessions, ACCOUNT, None, 10, None, include_children=False)
    r(sessions_q.sessions_of_agent, "a1", 10)
    r(sessions_q.ids_with_status, "streaming")
    # A run tree: a root, a child in another session, a grandchild without one.
    root = await w(runs_q.create_run, "r1", ACCOUNT, "a1", "s1", "e0", T0 + 20, title="first")
    child = await w(runs_q.create_run, "r2", ACCOUNT, "a1", "s2", None, T0 + 21, origin="agent", parent=root)
    await w(runs_q.create_run, "r3", ACCOUNT, "a1", None, None, T0 + 21, origin="agent", parent=child,
            title="deep")
    await w(runs_q.create_run, "r4", ACCOUNT, "a1", "s1", None, T0 + 21)   # same ms: insertion order
    r(runs_q.queued_runs, 10)
    # the account's runs in flight, as kept (schema 24's triggers) and as counted from the runs: 4
    r(turns_q.in_flight, ACCOUNT, 100)
    r(turns_q.in_flight, ACCOUNT, 3)   # at most the cap asked
    r(turns_q.counted_in_flight, ACCOUNT)
    r(runs_q.queued_runs_of_session, "s1", 10)
    r(runs_q.has_active_run, "s1")
    r(runs_q.has_active_run, "no-such-session")
    r(runs_q.active_runs_of_session, "s1")
    # a settled plan frozen on the root, its child stamped with the step it served
    await w(runs_q.set_plan, "r1", {"steps": [{"id": "p1", "label": "look", "status": "done"}],
                                    "ownerRunId": "r1", "settledAt": T0 + 21})
    await w(runs_q.set_plan, "no-such-run", {"steps": []})
    await w(runs_q.set_plan_step, child, {"id": "p1", "label": "look"})
    # a workflow: its script and the run it continues; a failure's detail (read with the run below)
    await w(runs_q.make_workflow, child, "export default async () => 1", "r1")
    await w(runs_q.set_error_detail, child["id"], {"stack": "at <input>:1", "callSeq": 2})
    r(runs_q.successor_of, "r1")   # the workflow run continuing r1
    r(runs_q.successor_of, "no-such-run")
    r(runs_q.status_of, child["id"])
    r(runs_q.status_of, "no-such-run")
    tree = r(runs_q.runs_of_tree, "r1", None, 10)
    r(runs_q.with_child_counts, tree)   # r1 and r2 spawned one each, r3 and r4 none
    out.append(runs_q.descendants(tree, "r1"))
    r(runs_q.runs_of_session, "s1", None, 10)
    r(runs_q.runs_of_agent, "a1", "queued", 10)
    r(runs_q.latest_run_of_session, "s1")
    r(runs_q.user_event_of, "r1")
    r(runs_q.session_status_from_runs, "s1")
    r(agents_q.get_agent, "a1")   # busy
    await w(runs_q.set_run_status, "r1", "failed", T0 + 30, error={"code": "provider-error", "message": "no"},
            usage={"input": 3, "output": 4, "total": 7})
    await w(runs_q.cancel_runs, r(runs_q.active_runs_of_session, "s1"), T0 + 31)
    await w(runs_q.requeue_interrupted, T0 + 32)
    assert r(turns_q.in_flight, ACCOUNT, 100) == r(turns_q.counted_in_flight, ACCOUNT) == 2   # r2 and r3 live on
    r(runs_q.session_status_from_runs, "s1")
    r(runs_q.runs_of_agent, "a1", None, 10)
    r(owners_q.run_access, "r3")
    # Sharing: an invitation, its acceptance, what the guest then lists, public read.
    await w(accounts_q.ensure_account, GUEST, T0)
    await w(collab_q.invite, "a1", GUEST, "reader", T0 + 40)
    r(collab_q.invites_of, GUEST)
    r(collab_q.accepted_role, "a1", GUEST)
    await w(collab_q.accept, "a1", GUEST, T0 + 41)
    await w(collab_q.accept, "a1", GUEST, T0 + 42)   # again: nothing changes
    await w(collab_q.invite, "a1", GUEST, "writer", T0 + 43)   # a new role, still accepted
    await w(collab_q.invite, "a2", GUEST, "reader", T0 + 44)
    r(collab_q.get, "a1", GUEST)
    r(collab_q.collaborators_of, "a1")
    r(collab_q.members, "a1")
    r(collab_q.shared_agents, GUEST)
    r(collab_q.list_shared_agents, GUEST)
    r(collab_q.agents_page, GUEST, 10, None, 1 << 20)
    r(collab_q.agents_page, GUEST, 1, None, 1 << 20)
    r(collab_q.shared_agent_rows, GUEST, 5, {"updatedBefore": T0 + 100, "idAfter": ""})
    r(collab_q.sessions_page, GUEST, ["a1"], 10, None, True)
    r(collab_q.sessions_page, GUEST, ["a1"], 1, {"updatedBefore": T0 + 100, "idBefore": "s9"}, False)
    await w(collab_q.decline, "a1", GUEST)   # accepted: not an invitation
    await w(collab_q.decline, "a2", GUEST)
    await w(collab_q.set_public_read, "a2", True, T0 + 45)
    r(owners_q.agent_access, "a2")
    r(roles_q.agent_role, GUEST, "a2")     # public read: a reader
    r(roles_q.agent_role, ACCOUNT, "a2")
    r(roles_q.session_role, GUEST, "s1")   # through its agent
    r(roles_q.session_role, ACCOUNT, "s1")
    r(roles_q.run_role, ACCOUNT, "r1")
    r(roles_q.run_role, ACCOUNT, "no-such-run")
    r(roles_q.key_role, GUEST, "agents", "a2")
    r(roles_q.key_role, ACCOUNT, "sessions", "s1")
    r(roles_q.key_role, ACCOUNT, "runs", "r1")
    r(roles_q.key_role, ACCOUNT, "account", ACCOUNT)
    r(roles_q.is_shared, "a2")
    r(roles_q.is_shared, "a1")
    r(agents_q.get_agent, "a2", "reader")
    await w(collab_q.remove, "a1", GUEST)
    r(owners_q.session_access, "s3")
    # Public chat (server/store/visitors.py): agent av opened, a visitor's session, two messages
    # admitted (the first run's tokens given back in part), a third refused, a fresh day's window.
    visitor = "z6MkVisitor"
    await w(agents_q.create_agent, "av", ACCOUNT, {"name": "visited"}, "/tmp/av", T0 + 60)
    r(roles_q.agent_role, visitor, "av")   # closed: nothing
    chat = {"messagesPerHour": 2, "tokensPerDay": 100, "tokensPerDayAll": 150, "tools": ["navigate"]}
    await w(visitors_q.set_config, "av", chat, T0 + 61)
    r(visitors_q.get_config, "av")
    r(owners_q.agent_flags, "av")
    r(roles_q.agent_role, visitor, "av")   # open: a visitor
    await w(sessions_q.create_session, "sv", ACCOUNT, "av", None, T0 + 62)
    await w(visitors_q.set_visitor, "sv", visitor)
    r(visitors_q.visitor_of, "sv")
    r(visitors_q.visitors_of, "av")
    r(roles_q.session_role, visitor, "sv")
    r(roles_q.session_role, GUEST, "sv")   # another account: nothing
    await w(runs_q.create_run, "rv1", ACCOUNT, "av", "sv", None, T0 + 63)
    r(roles_q.run_role, visitor, "rv1")
    first = await w(visitors_q.admit, "av", visitor, chat, T0 + 63, 80, 4)
    await w(visitors_q.reserve_run, "rv1", "av", visitor, first, T0 + 63)
    r(visitors_q.reservation, "rv1")
    r(visitors_q.live_visitor_sessions, "av")
    await w(visitors_q.admit, "av", visitor, chat, T0 + 64, 80, 4)   # its run still live: refused
    await w(visitors_q.settle_run, "rv1", 30)
    await w(visitors_q.settle_run, "rv1", 30)   # (once)
    r(visitors_q.usage, "av", visitor, T0 + 64)
    r(visitors_q.usage, "av", "", T0 + 64)
    await w(visitors_q.admit, "av", visitor, chat, T0 + 65, 80, 4)
    await w(visitors_q.admit, "av", visitor, chat, T0 + 66, 80, 4)   # the hour's two are spent
    r(visitors_q.usage, "av", visitor, T0 + 86_400_000)   # a new day
    await w(visitors_q.set_config, "av", None, T0 + 67)
    r(roles_q.session_role, visitor, "sv")   # closed: its own session is gone from it
    await w(visitors_q.forget_agent, "av")
    # Providers and secrets (ids given: both drivers must keep what they are handed).
    config = {"type": "openai", "model": "m", "secretRefs": {"apiKey": "key"}}
    await w(providers_q.set_provider, ACCOUNT, "p", config, T0 + 50, "4b1d0c7e-0000-4000-8000-000000000001")
    await w(providers_q.set_provider, ACCOUNT, "p", {**config, "model": "m2"}, T0 + 51, "unused-id")
    await w(providers_q.set_provider, ACCOUNT, "a-first", {"type": "echo"}, T0 + 52,
            "4b1d0c7e-0000-4000-8000-000000000002")
    r(providers_q.get_provider, ACCOUNT, "p")
    r(providers_q.list_providers, ACCOUNT)
    r(providers_q.count_providers, ACCOUNT)
    await w(secrets_q.set_secret, ACCOUNT, "key", b"sealed-1", {"hint": "sk-...1"}, T0 + 53,
            "4b1d0c7e-0000-4000-8000-000000000003")
    await w(secrets_q.set_secret, ACCOUNT, "key", b"sealed-2", None, T0 + 54, "unused-id")
    await w(secrets_q.set_secret, ACCOUNT, "another", b"sealed-3", None, T0 + 55,
            "4b1d0c7e-0000-4000-8000-000000000004")
    r(secrets_q.list_secret_names, ACCOUNT)
    r(secrets_q.get_secret_ciphertext, ACCOUNT, "key")
    r(secrets_q.get_secret_metadata, ACCOUNT, "key")
    r(secrets_q.get_secret_metadata, ACCOUNT, "another")
    r(secrets_q.get_secret_metadata, ACCOUNT, "no-such-secret")
    box = SecretBox(bytes(range(32)))
    await w(secrets_q.set_secret, ACCOUNT, "sealed", box.seal(b"sk-live", secrets_q.secret_aad(ACCOUNT, "sealed")),
            None, T0 + 56, "4b1d0c7e-0000-4000-8000-000000000005")
    r(secrets_q.read_secret, box, ACCOUNT, "sealed")
    # A subscription's tokens: read with their version, the lease swapped only at that version.
    _sealed, meta, version = r(secrets_q.token_row, ACCOUNT, "key")
    r(secrets_q.token_row, ACCOUNT, "no-such-secret")
    assert await w(secrets_q.swap_token_metadata, ACCOUNT, "key", version, meta, {"lease": 1}, T0 + 56)
    assert not await w(secrets_q.swap_token_metadata, ACCOUNT, "key", version, meta, {"lease": 2}, T0 + 56)
    await w(secrets_q.mark_token, ACCOUNT, "key", {"needsReauth": True}, T0 + 56)
    await w(secrets_q.store_token, ACCOUNT, "key", b"sealed-new", {}, T0 + 56)
    r(secrets_q.token_row, ACCOUNT, "key")
    await w(removal_q.delete_provider, ACCOUNT, "p")
    await w(removal_q.delete_provider, ACCOUNT, "p")
    r(secrets_q.list_secret_names, ACCOUNT)
    await w(secrets_q.delete_secret, ACCOUNT, "another")
    r(secrets_q.list_secret_names, ACCOUNT)
    # Replay signatures, one by one and in a batch.
    await w(sig_q.claim_signature, b"\x07" * 64, T0 + 1_000, T0)
    await w(sig_q.claim_signatures, [(b"\x08" * 64, T0 + 10), (b"\x07" * 64, T0 + 2_000)], T0 + 5)
    r(sig_q.unexpired_signatures, T0 + 6)
    out[-1] = sorted(out[-1])   # no order promised (the guard reloads them into a dict)
    await w(sig_q.prune_signatures, T0 + 11)
    r(sig_q.unexpired_signatures, T0)
    r(events_q.last_seq, "s1")
    r(events_q.event_bodies_page, "s1", 1, 2, 1 << 20)
    r(events_q.event_bodies_joined, "s1", 1, 2, 1 << 20)
    r(agents_q.agent_account, "a2")
    # Files: memory (with search), attachments, a staged upload committed, the quota, the check.
    limits = memory_q.MemoryLimits(quota=10_000_000, max_files=100)
    await w(memory_q.write_file, "a2", ACCOUNT, "notes/trip.md", b"Lisbon trams are yellow", T0 + 57, limits)
    await w(memory_q.write_file, "a2", ACCOUNT, "notes/bin", bytes(range(256)) * 5000, T0 + 57, limits)
    await w(memory_q.write_file, "a2", ACCOUNT, "same", b"Lisbon trams are yellow", T0 + 57, limits)
    r(memory_q.list_memory, "a2")
    r(memory_q.list_dir, "a2", "notes")
    r(memory_q.read_file, "a2", "notes/trip.md", 1 << 20)
    r(memory_q.file_info, "a2", "notes/bin")
    listed = r(agents_q.get_agent, "a2")
    r(listing_q.fingerprint, listed)
    r(listing_q.read_listing, listed)
    r(memory_q.check_writable, "a2", ACCOUNT, "other", 10, limits)
    called.add("memory.search")   # which files only: each driver ranks and marks snippets its own way
    out.append([sorted(x["path"] for x in db.read(memory_q.search, "a2", q, 10)) for q in ("yellow trams", "ams a")])
    await w(attachments_q.save, "s3", ACCOUNT, "a.txt", "text/plain", b"attached", T0 + 58)
    await w(attachments_q.save, "s3", ACCOUNT, "again.txt", None, b"attached", T0 + 58)
    r(attachments_q.info, "s3", hashlib.sha256(b"attached").hexdigest())
    r(attachments_q.read, "s3", hashlib.sha256(b"attached").hexdigest(), 1 << 20, 2, 3)
    r(attachments_q.check_room, "s3", ACCOUNT, 10, None)
    r(file_quota_q.used_bytes, ACCOUNT)
    await w(uploads_q.begin, "u1", ACCOUNT, ACCOUNT, {"kind": "session-attachment", "agentId": "a2",
                                                      "sessionId": "s3", "name": "up.bin"}, 3_000_000, T0 + 58)
    await w(uploads_q.append, "u1", ACCOUNT, 0, b"u" * 1_500_000, T0 + 58)
    await w(uploads_q.append, "u1", ACCOUNT, 1_500_000, b"v" * 1_500_000, T0 + 58)
    up = r(uploads_q.get, "u1", ACCOUNT)
    scan = r(blobs_q.scan, up.blob_id, 100)
    await w(uploads_q.finish, "u1", ACCOUNT, 3_000_000)
    sealed = await w(blobs_q.seal, up.blob_id, scan.sha256)
    await w(attachments_q.attach_blob, "s3", ACCOUNT, scan.sha256, sealed, "up.bin", None, 3_000_000, T0 + 59)
    r(attachments_q.blob_of, "s3", scan.sha256.hex())
    r(blobs_q.read_range, sealed, 1_499_990, 20)
    await w(uploads_q.begin, "u2", ACCOUNT, ACCOUNT, {"kind": "memory", "agentId": "a2", "path": "x"}, 5, T0 + 59)
    await w(uploads_q.abort, "u2", ACCOUNT)
    await w(uploads_q.begin, "u3", ACCOUNT, ACCOUNT, {"kind": "memory", "agentId": "a2", "path": "x"}, 5, T0 + 59)
    await w(uploads_q.sweep, T0 + 59 + 3_600_001)
    # A code sandbox's run: memory checked out whole, what it changed committed in one go.
    called.add("memory.checkout")   # (blob ids are each driver's own: the paths and bytes compared)
    base = db.read(memory_q.checkout, "a2", 1 << 30)
    out.append(sorted((path, data) for path, (_, data) in base.items()))
    out.append(db.read(memory_q.checkout, "a2", 10))   # more than 10 bytes: None, nothing read
    await w(memory_q.commit_workspace, "a2", ACCOUNT, {p: b for p, (b, _) in base.items()},
            {"notes/trip.md": b"Lisbon trams are blue", "ran.txt": b"new"}, ["same"], T0 + 59, limits)
    await w(memory_q.delete_path, "a2", "notes")
    r(blobs_q.counts)
    r(blobs_q.check)
    # Idempotency records, then deleting a whole agent and a session.
    await w(idem_q.idem_put, ACCOUNT, "CreateSession", "c1", b"fp", b"\xa1aa\x01", T0 + 60)
    r(idem_q.idem_get, ACCOUNT, "CreateSession", "c1")
    await w(lifecycle_q.set_definition, "a2", {"name": "second", "v": 2}, T0 + 61)
    await w(agents_q.set_agent_status, "a2", "running", T0 + 62)
    await w(agents_q.settle_running_agents, T0 + 63)
    await w(agents_q.touch_agent, "a2", T0 + 64)
    called.add("agents.touch_read_agent")   # (its row read in the same job first, as CreateSession's statement does)
    out.append(await db.write(lambda conn: agents_q.touch_read_agent(
        conn, conn.execute(agents_q.AGENT_ROW, ("a2",)).fetchone(), "a2", T0 + 65)))
    await w(lifecycle_q.delete_agent, "a2")
    r(lifecycle_q.agent_ids)
    r(lifecycle_q.state_dirs)
    await w(sessions_q.delete_session, "s2")
    r(sessions_q.get_session, "s1")
    r(runs_q.get_run, "r2")
    # Signing identities: sealed seeds, who signs with one, a retried create after a delete.
    name = "hm-account-z6MkIdentity0001"
    sealed = box.seal(b"\x05" * 32, identities_q.identity_aad(ACCOUNT, name))
    await w(identities_q.insert_identity, ACCOUNT, name, "z6MkIdentity0001xyz", "4b1d0c7e-0000-4000-8000-000000000009",
            sealed, "Label", None, "created", T0 + 70)
    r(identities_q.get_identity, ACCOUNT, name)
    r(identities_q.open_seed, box, ACCOUNT, name)
    r(identities_q.origin_of, ACCOUNT, name)
    r(identities_q.list_identities, ACCOUNT)
    r(identities_q.list_identities, ACCOUNT, [name])
    r(identities_q.count_identities, ACCOUNT)
    r(identities_q.missing_names, ACCOUNT, [name, "absent"])
    await w(identities_q.update_identity, ACCOUNT, name, "New", "ipfs://bafyicon", "http://hm", T0 + 71)
    # The publication queue: two items of one identity in order, a claim, a retry, a refusal.
    subject = f"identity:{name}"
    for i, what in enumerate(("the new account", "the profile")):
        await w(pub_q.enqueue, item_id=f"pub-{i}", account_id=ACCOUNT, subject=subject, kind="blobs",
                identity_name=name, agent_id=None, what=what, body={"blobs": [{"cid": "bafy", "data": b"x"}]},
                server_url="http://hm", now=T0 + 71)
    r(pub_q.get, "pub-0")
    r(pub_q.has_pending, ACCOUNT, subject)
    await w(pub_q.claim, "server-a", T0 + 72, 1000, 8)   # pub-0 alone: pub-1 waits behind it
    await w(pub_q.claim, "server-b", T0 + 72, 1000, 8)   # nothing: held
    r(pub_q.next_wake, T0 + 72)
    await w(pub_q.retry_later, "pub-0", "server-a", "no answer", T0 + 80, T0 + 72)
    await w(pub_q.claim, "server-b", T0 + 80, 1000, 8)
    await w(pub_q.sent, "pub-0", "server-b")
    await w(identities_q.mark_published, ACCOUNT, name, "http://hm", T0 + 81)
    await w(pub_q.claim, "server-a", T0 + 81, 1000, 8, T0 + 10_000)
    await w(pub_q.release, ["pub-1"], "server-a")
    await w(pub_q.claim, "server-a", T0 + 81, 1000, 8)
    await w(pub_q.failed, "pub-1", "server-a", "refused", T0 + 82)
    r(pub_q.counts)
    r(pub_q.of_identities, ACCOUNT)
    await w(pub_q.drop_identity, ACCOUNT, name)
    await w(agents_q.create_agent, "a3", ACCOUNT, {"name": "signer", "signingKeys": [name]}, "/tmp/a3", T0 + 72)
    r(identities_q.agents_signing_with, ACCOUNT, name)
    await w(idem_q.idem_put, ACCOUNT, "CreateSigningIdentity", "c2", b"fp",
            codec.encode({"identity": {"name": name}}), T0 + 73)
    await w(identities_q.forget_idempotency, ACCOUNT, name)
    r(idem_q.idem_get, ACCOUNT, "CreateSigningIdentity", "c2")
    await w(identities_q.delete_identity, ACCOUNT, name)
    await w(identities_q.delete_identity, ACCOUNT, name)
    # Agent drafts: kept, changed, listed, published, deleted, and gone with their agent.
    blocks = [{"block": {"type": "Paragraph", "id": "b1", "text": "hi", "annotations": [], "attributes": {}}}]
    await w(drafts_q.insert_draft, "d1", ACCOUNT, "a3", "Draft", blocks, {"name": "Draft"}, None, None, "/d", None,
            T0 + 74)
    await w(drafts_q.update_draft, ACCOUNT, "a3", "d1", "Draft 2", blocks, {"name": "Draft 2"}, "hm://x/y", None,
            None, None, T0 + 75)
    await w(drafts_q.insert_draft, "d2", ACCOUNT, "a3", "Other", [], {}, None, None, None, None, T0 + 76)
    r(drafts_q.get_draft, ACCOUNT, "a3", "d1")
    r(drafts_q.list_drafts, ACCOUNT, "a3", 10)
    await w(drafts_q.mark_published, ACCOUNT, "a3", "d1", "hm://x/y", "bafyv", T0 + 77)
    await w(drafts_q.mark_deleted, ACCOUNT, "a3", "d2", T0 + 78)
    await w(drafts_q.mark_deleted, ACCOUNT, "a3", "d2", T0 + 79)   # again: nothing
    r(drafts_q.get_draft, ACCOUNT, "a3", "d2")
    r(drafts_q.list_drafts, ACCOUNT, "a3", 10)
    await w(lifecycle_q.delete_agent, "a3")
    r(drafts_q.list_drafts, ACCOUNT, "a3", 10)   # its drafts went with it
    r(blobs_q.counts)   # the agent's files went with it
    # The shared secrets key: recorded by the first key, accepted again, refused for another.
    await w(key_check.same_key, SecretBox(bytes(32)))
    await w(key_check.same_key, SecretBox(bytes(32)))
    await w(key_check.same_key, SecretBox(bytes([1]) * 32))
    # --accept-new-secrets-key: the other key recorded, then accepted.
    await w(key_check.record_key, SecretBox(bytes([1]) * 32))
    await w(key_check.same_key, SecretBox(bytes([1]) * 32))
    await delegation_shapes(db, w, r)   # (version 8's tables)
    await trigger_shapes(db, w, r, out)   # (last: the tool loop's verbs, version 9's tables)
    # Subscription sign-ins in progress (server/store/provider_logins.py): start, replace, claim,
    # complete, fail, expiry as read, sweep.
    from seed_agents.server.store import provider_logins as plog_q
    await w(plog_q.start, "pl1", ACCOUNT, "openai", b"sealed-verifier", "state-1", T0, T0 + 1000, 8, 100)
    await w(plog_q.start, "pl2", ACCOUNT, "openai", b"sealed-verifier", "state-2", T0 + 1, T0 + 1001, 8, 100)
    r(plog_q.get, ACCOUNT, "pl1", T0 + 2)
    r(plog_q.get, "z6MkSomeoneElse", "pl2", T0 + 2)
    await w(plog_q.claim, ACCOUNT, "pl2", T0 + 3, T0 + 500)
    await w(plog_q.claim, ACCOUNT, "pl2", T0 + 4, T0 + 500)   # taken: exchanging
    await w(plog_q.complete, "pl2", "openai-subscription-oauth", T0 + 5)
    await w(plog_q.fail, "pl2", "too late", T0 + 6)
    await w(plog_q.start, "pl3", ACCOUNT, "openai", b"v", "state-3", T0 + 7, T0 + 8, 8, 100)
    r(plog_q.get, ACCOUNT, "pl3", T0 + 9)   # expired as read
    await w(plog_q.sweep, T0 + 10_000, 1000)
    r(plog_q.get, ACCOUNT, "pl1", T0 + 10_000)
    # What `seed-agents import` writes (server/store/imports.py): each row once, a second insert
    # left alone; events past each session's last_seq, over several sessions in one unit.
    from seed_agents.server.store import imports as imp_q
    await w(imp_q.account, "z6MkImported", T0)
    await w(imp_q.account, "z6MkImported", T0 + 1)
    await w(imp_q.signer, "z6MkImported", "z6MkImpSigner", "agent", None, T0)
    await w(imp_q.provider, "z6MkImported", "p", codec.encode({"type": "custom"}), "prov-imp", T0, T0)
    await w(imp_q.provider, "z6MkImported", "p", codec.encode({"type": "custom"}), "prov-imp", T0, T0)
    await w(imp_q.secret, "z6MkImported", "k", b"sealed", None, "sec-imp", T0, T0)
    await w(imp_q.identity, "z6MkImported", "hm-account-z6MkIdentity", "idn-imp", "z6MkIdentity", b"seed", "L",
            None, T0, T0)
    await w(imp_q.agent, "ai1", "z6MkImported", codec.encode({"name": "imp"}), "/tmp/ai1", "idle", True, T0, T0)
    await w(imp_q.agent, "ai1", "z6MkImported", codec.encode({"name": "imp"}), "/tmp/ai1", "idle", True, T0, T0)
    await w(imp_q.collaborator, "ai1", "z6MkGuestImp", "writer", "accepted", T0, T0, T0)
    await w(imp_q.trigger, ("ti1", "z6MkImported", "ai1", "t", 1, "schedule", codec.encode({"type": "schedule"}),
                            codec.encode("go"), None, T0, T0, None, None, None, T0 + 60_000))
    await w(imp_q.tool_document, "z6MkImported", "ai1", "lam", "lambda", "bafy-imp", b"\xa0", True, T0, T0)
    await w(imp_q.sessions, [("si1", "z6MkImported", "ai1", "t", "user", "idle", None, None, None, None, None, T0, T0),
                             ("si2", "z6MkImported", "ai1", None, "system", "idle", "si1", None, None, None, None,
                              T0, T0)])
    await w(imp_q.sessions, [("si1", "z6MkImported", "ai1", "t", "user", "idle", None, None, None, None, None, T0, T0)])
    r(imp_q.sessions_present, ["si1", "si2", "nope"])
    body = codec.encode({"id": "ei1", "sessionId": "si1", "seq": 1, "event": user_message("imp"), "createdAt": T0})
    await w(imp_q.bulk_settings)
    unit = [("si1", "ai1", 0, ["ei1", "ei2"], [T0, T0 + 1], [body, body], ("message", "user", T0, T0 + 1)),
            ("si2", "ai1", 0, ["ei3"], [T0 + 2], [body], ("message", None, None, T0 + 2))]
    await w(imp_q.append_events, unit)
    await w(imp_q.append_events, unit)   # again: nothing past last_seq
    await w(imp_q.append_events, [("si1", "ai1", 1, ["ei2", "ei4"], [T0 + 1, T0 + 3], [body, body],
                                   ("message", None, None, T0 + 3))])   # overlapping: only seq 3 goes in
    await w(imp_q.idempotency, "z6MkImported", "CreateSession", "c1", b"\x01" * 32, codec.encode({"_": "x"}), T0)
    await w(imp_q.idempotency, "z6MkImported", "CreateSession", "c1", b"\x01" * 32, codec.encode({"_": "x"}), T0)
    r(imp_q.event_bodies, "si1", [1, 2, 3])
    r(imp_q.counts, "session_events", "session_id", ["si1", "si2"])
    r(imp_q.attachment_present, "si1", "00" * 32)
    r(imp_q.memory_present, "ai1", "a.md")
    await w(imp_q.run, {"id": "ri1", "account_id": "z6MkImported", "agent_id": "ai1", "session_id": "si1",
                        "status": "succeeded", "created_at": T0, "updated_at": T0, "root_run_id": "ri1",
                        "origin": "user", "title": "t", "usage": codec.encode({"total": 1})})
    await w(imp_q.journal, "ri1", [(1, codec.encode({"kind": "log"}), T0)])
    await w(imp_q.journal, "ri1", [(1, codec.encode({"kind": "log"}), T0)])
    await w(imp_q.wait, "ri1", "w1", "z6MkImported", codec.encode({"signal": "go"}), None, T0)
    await w(imp_q.firing, ("fi1", "z6MkImported", "ai1", "ti1", "k1", "skipped", None, None, "why", T0, "a summary"))
    await w(imp_q.firing, ("fi1", "z6MkImported", "ai1", "ti1", "k1", "skipped", None, None, "why", T0, "a summary"))
    await w(imp_q.watermark, ("z6MkImported", "http://hm", codec.encode({"seenKeys": []}), None, None, None))
    draft_row = ("di1", "z6MkImported", "ai1", "Draft", "blocks", codec.encode([]), None, None, None, "/d", None,
                 "idle", T0, T0, None, None, None)
    await w(imp_q.draft, draft_row)
    await w(imp_q.draft, draft_row)
    await w(imp_q.idempotency, "z6MkImported", "CreateSession", "req-1", b"fp", b"\xa0", T0)
    await w(imp_q.idempotency, "z6MkImported", "CreateSession", "req-1", b"fp", b"\xa0", T0)   # again: kept as is
    # A replay's kept frames are sent only while the session still holds their range.
    r(events_q.holds_range, "si1", 1, 2)
    r(events_q.holds_range, "si1", 2, 2)
    r(events_q.holds_range, "si1", 1, 3)
    r(events_q.holds_range, "nope", 1, 1)
    return out


def running(conn, run_id: str) -> None:
    """A run as a claim leaves it (PostgreSQL: with a lease)."""
    lease = ", lease_owner = 'shape', lease_expires_at = 9999999999999" if conn.traits.run_leases else ""
    conn.execute(f"UPDATE runs SET status = 'running', attempt = 1{lease} WHERE id = ?", (run_id,))


async def delegation_shapes(db, w, r) -> None:  # noqa: ANN001
    """Delegation, parked runs, the journal, tool documents and MCP servers (version 8)."""
    from seed_agents.server.store import delegation as del_q
    from seed_agents.server.store import journal as journal_q
    from seed_agents.server.store import mcp_servers as mcp_q
    from seed_agents.server.store import parking as parking_q
    from seed_agents.server.store import tool_documents as tools_q
    from seed_agents.server.store import tool_events

    ids = iter(f"d-{i}" for i in range(1000))

    def new_id() -> str:
        return next(ids)

    for n in (1, 2, 3, 4):
        await w(sessions_q.create_session, f"sp{n}", ACCOUNT, "a1", f"parent {n}", T0 + 100 + n)
        await w(runs_q.create_run, f"p{n}", ACCOUNT, "a1", f"sp{n}", None, T0 + 100 + n)
        await db.write(running, f"p{n}")
    parent = await w(parking_q.lock_run, "p1")
    await w(del_q.create_child, parent, "sp1", child_session_id="cs1", child_run_id="c1", tool_call_id="t1",
            title="child", brief="do it", spec={"brief": "do it"}, now=T0 + 110, event_ids=("e-c1", "e-sp1"),
            budget={"tokens": 100})
    r(del_q.child_count, "sp1")
    r(runs_q.child_of_call, "p1", "t1")
    r(runs_q.child_of_call, "p1", "t2")
    await w(runs_q.hand_over_call, "c1", "c1", "t1", {"brief": "do it"}, {"tokens": 100})   # (to itself: unchanged)
    r(del_q.child_input, "c1")
    r(del_q.budget_of, "c1")
    await w(del_q.reserve, "p1", 100)
    await w(del_q.record_spent, "c1", 40)
    r(del_q.budget_of, "p1")
    r(parking_q.live_children_of_calls, "p1", ["t1", "t2"])
    await w(parking_q.park, parent, {"reason": "children", "toolCallIds": ["t1"]}, T0 + 111)
    r(parking_q.stored_wait, "p1")
    await w(journal_q.append, "p1", {"kind": "call", "tool": "delegate"}, T0 + 112)
    await w(journal_q.record_tool_events, "p1", [({"seq": 3, "event": {"type": "tool_call", "id": "k",
                                                                     "name": "read"}}, b"")], T0 + 113)
    # (a tool call and its result, as every entry point records them: events, journal, notice)
    await w(tool_events.record, "sp2", [{"type": "tool_call", "id": "k2", "name": "read", "input": {}, "actor": "agent"},
                                        {"type": "tool_result", "toolCallId": "k2", "name": "read", "output": "x",
                                         "actor": "agent"}], T0 + 113, new_id, run=r(runs_q.get_run, "p2"),
            notice=(ACCOUNT, "a1"))
    r(journal_q.entries, "p1", 0, 10)
    r(journal_q.entry, "p1", 2)
    r(journal_q.tree_entries, "p1", 10)
    await w(del_q.set_output, "c1", {"text": "done"})
    r(del_q.run_output, "c1")
    await w(del_q.cancel_subtrees, [r(runs_q.get_run, "c1")], T0 + 114, new_id)   # the parent wakes
    r(runs_q.get_run, "p1")
    for n, wait in ((2, {"reason": "event", "waitId": "w2"}), (3, {"reason": "event", "waitId": "w3",
                                                                  "timeoutAt": T0 + 150})):
        await w(parking_q.park, r(runs_q.get_run, f"p{n}"), wait, T0 + 120, match={"signal": "go"})
    r(parking_q.next_wake)
    r(parking_q.due, T0 + 200, 10)
    await w(parking_q.signal, "p2", "stop", None, T0 + 130)
    await w(parking_q.signal_agent, ACCOUNT, "a1", "go", {"x": 1}, T0 + 131)
    r(parking_q.run_agent, "p2")
    await w(parking_q.signal, "p2", "go", {"x": 1}, T0 + 131)
    await w(parking_q.time_out, "p3", T0 + 140)
    await w(parking_q.time_out, "p3", T0 + 160)
    await w(parking_q.end_waits, ["p3"])
    # A workflow's wait on the activity feed: found by the monitor, answered by a matching event only.
    await w(parking_q.park, r(runs_q.get_run, "p4"), {"reason": "event", "waitId": "w4"}, T0 + 141,
            match={"eventType": "comment", "author": "hm://z6Mkauthor"})
    r(parking_q.activity_wait_accounts)
    await w(parking_q.deliver_activity, ACCOUNT, {"type": "capability"}, {"n": 0}, T0 + 142)
    r(runs_q.get_run, "p4")
    await w(parking_q.deliver_activity, ACCOUNT, {"type": "comment", "author": "z6Mkauthor"}, {"n": 1}, T0 + 143)
    r(runs_q.get_run, "p4")
    r(parking_q.activity_wait_accounts)
    # Tool documents and MCP servers.
    await w(tools_q.ensure_builtins, ACCOUNT, "a1", T0 + 170)
    r(tools_q.get_document, ACCOUNT, "a1", "search")
    lam = {"name": "lam", "kind": "lambda", "summary": "s", "description": "d", "input": {"type": "object"},
           "source": "x", "runtime": "python"}
    await w(tools_q.save_lambda, ACCOUNT, "a1", lam, None, None, T0 + 171)
    await w(tools_q.set_enabled, ACCOUNT, "a1", "search", False, T0 + 172)
    await w(tools_q.delete_lambda, ACCOUNT, "a1", "lam")
    await w(mcp_q.put_server, ACCOUNT, "srv", {"url": "https://x/mcp", "transport": "streamable-http",
                                                "enabled": True}, T0 + 173, "m1")
    await w(mcp_q.set_discovery, ACCOUNT, "srv", [{"name": "t", "inputSchema": {"type": "object"}}],
            {"state": "ok"}, T0 + 174)
    await w(mcp_q.set_discovery, ACCOUNT, "srv", None, {"state": "error", "error": "gone"}, T0 + 175)
    r(mcp_q.get_server, ACCOUNT, "srv")
    r(mcp_q.list_servers, ACCOUNT)
    r(mcp_q.count_servers, ACCOUNT)
    await w(lifecycle_q.set_definition, "a1", {"name": "agent", "model": "m", "mcpServers": ["srv"]}, T0 + 176)
    r(mcp_q.agents_picking, ACCOUNT, "srv")
    agent = r(agents_q.get_agent, "a1")
    await w(tools_q.sync_mcp, ACCOUNT, "a1", ["srv"], T0 + 177)
    rows = r(tools_q.list_documents, ACCOUNT, "a1")
    r(tools_q.refreshed, agent, rows, T0 + 178)
    await w(tools_q.refresh, agent, T0 + 179)
    await w(tools_q.delete_server_documents, ACCOUNT, "srv")
    await w(mcp_q.delete_server, ACCOUNT, "srv")
    await w(tools_q.delete_agent_documents, "a1")


async def trigger_shapes(db, w, r, out: list) -> None:  # noqa: ANN001
    """The tool loop's session verbs and run usage; triggers, their webhook credentials, firings,
    activity claims and watermarks (version 9), called as server/runtime/tool_loop.py,
    server/tools/session_tools.py and server/triggers/*.py call them."""
    from seed_agents.protocol.agent import plans
    from seed_agents.server.store import trigger_firings as firings_q
    from seed_agents.server.store import triggers as triggers_q
    from seed_agents.server.triggers import webhook

    t = T0 + 300
    # The tool loop: the plan verb (read, then replaced), the status verb, the usage written at
    # each step (only while the run runs) and what the run ended owing.
    await w(sessions_q.create_session, "sl1", ACCOUNT, "a1", None, t)
    await w(runs_q.create_run, "rl1", ACCOUNT, "a1", "sl1", "el1", t)
    await db.write(running, "rl1")
    r(sessions_q.get_plan, "sl1")   # none yet
    steps = [{"id": "1", "label": "find the tram lines", "status": "done"},
             {"id": "2", "label": "book the tickets", "status": "running"}]
    written = plans.normalize_plan({"title": "Lisbon trip", "steps": steps})
    await w(sessions_q.set_plan, "sl1", plans.next_plan(None, written, "rl1", t + 1), t + 1)
    previous = r(sessions_q.get_plan, "sl1")
    settled = plans.normalize_plan({"title": "Lisbon trip", "steps": [{**s, "status": "done"} for s in steps]})
    await w(sessions_q.set_plan, "sl1", plans.next_plan(previous, settled, "rl1", t + 2), t + 2)
    r(sessions_q.get_plan, "sl1")   # settled at t + 2
    # The next run retires the settled plan (its copy frozen on rl1 first); its own run never does.
    await w(sessions_q.retire_settled_plan, "sl1", "rl1", t + 2)
    await w(sessions_q.retire_settled_plan, "sl1", "rl-next", t + 2)
    r(sessions_q.get_plan, "sl1")   # none: retired
    # A continuation of sl1 (continue_session): the edge, found again by its call, the chain's size.
    await w(sessions_q.create_session, "sl2", ACCOUNT, "a1", "Lisbon, part two", t + 2)
    await w(continuations_q.record, successor_id="sl2", predecessor_id="sl1", origin_id="sl1", account_id=ACCOUNT,
            tool_call_id="k1", run_id="rl1", event_id="el1", reason="long", now=t + 2,
            manifest={"version": 1, "handoff": "book the trams", "sources": [], "loaded": [], "cold": []})
    r(continuations_q.of_call, "sl1", "k1")
    r(continuations_q.of_call, "sl1", "k2")   # none
    r(continuations_q.of_successor, "sl2")
    r(continuations_q.chain_length, "sl1")
    r(sessions_q.get_session, "sl1")   # continuedBySessionId
    # A session's thoroughness, set and read through a run of its tree (the preset its turns use).
    await w(sessions_q.update_session, "sl1", t + 3, set_thoroughness=True, thoroughness="quick")
    r(sessions_q.thoroughness_of_tree, "rl1")
    r(sessions_q.thoroughness_of_tree, "no-such-run")
    await w(sessions_q.set_agent_status, "sl1", t + 3, title="Booking Lisbon trams", description="two steps")
    await w(sessions_q.set_agent_status, "sl1", t + 4, title=None, description="booked")
    await w(sessions_q.set_agent_status, "s1", t + 4, title="never over the user's", description=None)
    await w(runs_q.set_usage, "rl1", {"input": 10, "output": 5, "total": 15})
    ended = await w(runs_q.set_run_status, "rl1", "succeeded", t + 5, usage={"input": 12, "output": 6, "total": 18})
    await w(runs_q.set_unmet_obligations, ended, [{"kind": "plan", "steps": ["book the tickets"]}])
    await w(runs_q.set_usage, "rl1", {"input": 99, "output": 1, "total": 100})   # ended: not written
    r(runs_q.get_run, "rl1")

    # Triggers of agent a4: a schedule, a webhook (a block prompt, a wake), a run-completed one,
    # an activity one created disabled (a tool continuation).
    await w(agents_q.create_agent, "a4", ACCOUNT, {"name": "watcher"}, "/tmp/a4", t + 10)
    every = {"type": "schedule", "schedule": {"kind": "interval", "every": 5, "unit": "minutes"}}
    await w(triggers_q.create_trigger, "tr-s", ACCOUNT, "a4", "every five", True, every, "Check the inbox", None,
            t + 11, t + 11 + 300_000)
    r(triggers_q.count_of_agent, "a4")
    r(triggers_q.name_taken, "a4", "every five")
    r(triggers_q.name_taken, "a4", "every five", but="tr-s")
    blocks = [{"block": {"type": "Paragraph", "id": "p1", "text": "Read the deploy log"}, "children": []}]
    await w(triggers_q.create_trigger, "tr-w", ACCOUNT, "a4", "deploys", True, {"type": "webhook"}, blocks,
            {"kind": "wake", "signal": "deployed"}, t + 12, None)
    secret, box = "whsec_shape-0123456789", SecretBox(bytes(range(32)))
    for kept in (secret, "whsec_second"):   # a second store is refused: the first secret stays
        await w(triggers_q.set_credentials, "tr-w", ACCOUNT, webhook.secret_hash(kept),
                box.seal(kept.encode(), b"webhook\x00tr-w"), t + 12)   # (webhook.store_secret's seal)
    hashed, sealed = r(triggers_q.credentials, "tr-w")
    out[-1] = (hashed, webhook.open_secret(box, "tr-w", sealed))   # (each seal has its own nonce)
    r(triggers_q.hook_target, "tr-w")
    r(triggers_q.hook_target, "tr-s")   # not a webhook
    after_a1 = {"type": "run-completed", "agentId": "a1", "status": "succeeded"}
    await w(triggers_q.create_trigger, "tr-r", ACCOUNT, "a4", "after a1", True, after_a1, "Summarize what a1 did",
            {"kind": "newThread"}, t + 13, None)
    mention = {"type": "user-mention", "mentionedAccounts": [ACCOUNT]}
    await w(triggers_q.create_trigger, "tr-m", ACCOUNT, "a4", "mentions", False, mention, "Answer the mention",
            {"kind": "tool", "tool": "search", "input": {"query": "trams"}}, t + 14, None)
    r(triggers_q.get_trigger, "tr-w")
    r(triggers_q.get_trigger, "absent")
    r(triggers_q.trigger_access, "tr-w")
    r(triggers_q.trigger_access, "absent")
    r(triggers_q.trigger_named, "a4", "deploys")
    r(triggers_q.trigger_named, "a4", "absent")
    r(triggers_q.triggers_of_agent, "a4", 10)
    r(triggers_q.triggers_of_agent, "a4", 2)
    r(triggers_q.enabled_of_type, ("document-comment", "user-mention"))   # tr-m is off
    await w(triggers_q.update_trigger, "tr-m", t + 15, enabled=True, next_due_at=None, retime=True)
    r(triggers_q.enabled_of_type, ("document-comment", "user-mention"), ACCOUNT)
    r(triggers_q.enabled_of_type, ("run-completed",), GUEST)
    every_ten = {"type": "schedule", "schedule": {"kind": "interval", "every": 10, "unit": "minutes"}}
    slot = t + 16 + 600_000
    await w(triggers_q.update_trigger, "tr-s", t + 16, name="every ten", source=every_ten, prompt=blocks,
            next_due_at=slot, retime=True)
    await w(triggers_q.update_trigger, "tr-s", t + 10, continuation={"kind": "newThread"})   # an older clock
    await w(triggers_q.update_trigger, "absent", t + 16, name="gone")

    # The scheduler: the earliest slot, then the due schedule fired once for its slot (with the
    # slot before it recorded as missed), its work started, the next slot set.
    r(triggers_q.earliest_due)
    await w(triggers_q.due_triggers, slot - 1, 10)
    now = slot + 5
    due = await w(triggers_q.due_triggers, now, 10)
    trigger = due[0]
    r(firings_q.fired_since, "a4", now - 3_600_000)
    context = {"name": trigger["name"], "prompt": trigger["prompt"], "source": trigger["source"]}
    for at, status, work in ((slot - 600_000, "skipped", {"error": "missed: no server was running at this slot"}),
                             (slot, "created", {"session_id": "sf1", "run_id": "rf1"})):
        activity = {"type": "schedule", "scheduleKind": "interval", "scheduledAt": at, "firedAt": now,
                    "summary": "every 10 minutes"}
        await w(firings_q.insert_firing, f"f-{at}", trigger, f"schedule:tr-s:{at}", status, now, scheduled_at=at,
                activity=activity, context=context, **work)
    await w(sessions_q.create_session, "sf1", ACCOUNT, "a4", "every 10 minutes", now)
    await w(runs_q.create_run, "rf1", ACCOUNT, "a4", "sf1", None, now, title="every 10 minutes")
    await w(triggers_q.record_outcome, "tr-s", now, fired=True, error=None, next_due=slot + 600_000)
    # Another server's pass for the same slot: the key is taken, only the slot moves.
    await w(firings_q.insert_firing, "f-again", trigger, f"schedule:tr-s:{slot}", "created", now + 1,
            scheduled_at=slot, session_id="sf9", run_id="rf9")
    await w(triggers_q.set_next_due, "tr-s", slot + 600_000, now + 1)
    r(firings_q.firing_by_key, ACCOUNT, "tr-s", f"schedule:tr-s:{slot}")
    r(firings_q.firing_by_key, ACCOUNT, "tr-s", "schedule:tr-s:0")
    r(firings_q.fired_since, "a4", now - 3_600_000)
    r(firings_q.account_fired_since, ACCOUNT, now - 3_600_000)
    r(triggers_q.get_trigger, "tr-s")
    r(triggers_q.earliest_due)
    # The run it started ends: the firing records how, and run-completed triggers fire (depth 1).
    await db.write(running, "rf1")
    await w(runs_q.set_run_status, "rf1", "succeeded", now + 2)
    r(firings_q.firing_of_run, "rf1")
    r(firings_q.firing_of_run, "rl1")   # a run no firing started
    await w(firings_q.set_run_status, f"f-{slot}", "succeeded")
    r(triggers_q.enabled_of_type, ("run-completed",), ACCOUNT)
    done = {"type": "run-completed", "runId": "rl1", "runStatus": "succeeded", "runTitle": "", "agentId": "a1",
            "sessionId": "sl1", "summary": "a run succeeded"}
    reacted = r(triggers_q.get_trigger, "tr-r")
    await w(firings_q.insert_firing, "f-r", reacted, "rl1", "created", now + 3, session_id="sf2", run_id="rf2",
            activity=done, context={"name": reacted["name"], "prompt": reacted["prompt"], "source": after_a1},
            chain_depth=1)
    await w(firings_q.mark_error, "f-r", "agent a1 is gone")
    r(firings_q.firings_of_trigger, "tr-r", 5)
    # A continuation that could not start: failures counted, backed off, then cleared.
    r(triggers_q.failures_of, "tr-r")
    await w(triggers_q.record_outcome, "tr-r", now + 4, fired=False, error="agent a1 is gone")
    await w(triggers_q.record_outcome, "tr-r", now + 5, fired=False, error="agent a1 is gone", backoff_ms=30_000)
    r(triggers_q.failures_of, "tr-r")
    r(triggers_q.get_trigger, "tr-r")
    await w(triggers_q.clear_failures, "tr-r")
    r(triggers_q.failures_of, "tr-r")
    r(triggers_q.failures_of, "absent")
    # A webhook delivery (its body's digest kept) that wakes a parked run rather than starting one.
    body = b'{"deployed": "v2"}'
    hooked, _ = r(triggers_q.hook_target, "tr-w")
    await w(firings_q.insert_firing, "f-w", hooked, "webhook:deploy-42", "created", now + 6,
            activity={"type": "webhook", "idempotencyKey": "deploy-42", "contentType": "application/json",
                      "bytes": len(body), "body": {"deployed": "v2"}, "summary": "webhook call (18 bytes)"},
            context={"name": hooked["name"], "prompt": hooked["prompt"], "source": hooked["source"]},
            body_digest=hashlib.sha256(body).digest())
    await w(triggers_q.record_outcome, "tr-w", now + 6, fired=True, error=None)

    # The activity monitor: one poller per feed (a lease), a failed poll, an event claimed once,
    # its firing, the watermark past it.
    feed = "http://127.0.0.1:56001"
    r(firings_q.watermark, ACCOUNT, feed)
    await w(firings_q.take_poll_lease, ACCOUNT, feed, "server-a", now, 30_000)
    await w(firings_q.take_poll_lease, ACCOUNT, feed, "server-b", now + 1, 30_000)   # held
    await w(firings_q.take_poll_lease, ACCOUNT, feed, "server-a", now + 2, 30_000)   # renewed
    await w(firings_q.watermark_error, ACCOUNT, feed, now + 3, "HTTP 502 from the activity feed")
    r(firings_q.watermark, ACCOUNT, feed)   # no successful poll yet
    key = "comment:bafy-comment-1"
    await w(firings_q.claim_event, ACCOUNT, "tr-m", key, now + 4)
    await w(firings_q.claim_event, ACCOUNT, "tr-m", key, now + 5)   # claimed before
    mentioned = r(triggers_q.get_trigger, "tr-m")
    await w(firings_q.insert_firing, "f-m", mentioned, key, "created", now + 4, session_id="sf3",
            activity={"type": "activity", "event": {"type": "comment", "author": GUEST},
                      "summary": "a comment mentioning you"},
            context={"name": mentioned["name"], "prompt": mentioned["prompt"], "source": mention})
    await w(firings_q.set_watermark, ACCOUNT, feed, [key], now + 4, now + 5)
    r(firings_q.watermark, ACCOUNT, feed)
    await w(firings_q.watermark_error, ACCOUNT, feed, now + 6, "timed out")
    r(firings_q.watermark, ACCOUNT, feed)
    await w(firings_q.take_poll_lease, ACCOUNT, feed, "server-b", now + 40_000, 30_000)   # ran out: taken over

    # What clients read: firings and sessions of a trigger, a session's trigger context, the
    # startedByTrigger of listed sessions.
    r(firings_q.firings_of_trigger, "tr-s", 10)
    r(firings_q.firings_of_trigger, "tr-s", 1)
    r(firings_q.sessions_of_trigger, "tr-s", 10)
    r(firings_q.trigger_context, "sf1")   # a block prompt
    r(firings_q.trigger_context, "sf2")
    r(firings_q.trigger_context, "s1")    # not started by a trigger
    # GetSession's reads together (a backend with batched reads): the owner's first page of a
    # triggered session and a later one, a stranger, a missing session.
    for account, session_id, after in ((ACCOUNT, "sf1", 0), (ACCOUNT, "s1", 1), ("z6MkStranger", "s1", 0),
                                       (ACCOUNT, "no-such-session", 0)):
        role, found = r(session_view.fetch, account, session_id, after, 10, 1 << 20, after == 0)
        if role is not None:
            r(session_view.answer, session_id, found, 10, 1 << 20, 1 << 20)
    listed = [dict(s) for s in r(sessions_q.list_sessions, ACCOUNT, None, 50, None)[0]]
    r(firings_q.attribute_sessions, listed)
    out.append(listed)
    # History kept per trigger, then deletions (a trigger; all of an agent's).
    for n in range(3):
        await w(firings_q.insert_firing, f"f-old{n}", trigger, f"schedule:tr-s:{n}", "skipped", now + 7 + n,
                scheduled_at=n, error="missed")
    await w(firings_q.prune, "tr-s", 2)
    r(firings_q.firings_of_trigger, "tr-s", 10)
    # Combining: tr-m (with its claim) retired into tr-s; the claim comes along, once.
    await w(triggers_q.retire_into, "tr-m", "tr-s", now + 11)
    await w(triggers_q.retire_into, "tr-m", "tr-s", now + 12)   # again: the claim is there already
    r(triggers_q.get_trigger, "tr-m")
    await w(firings_q.claim_event, ACCOUNT, "tr-s", key, now + 13)   # imported: claimed before
    await w(triggers_q.delete_trigger, "tr-w")
    r(triggers_q.credentials, "tr-w")
    r(triggers_q.hook_target, "tr-w")
    await w(triggers_q.delete_agent_triggers, "a4")
    r(triggers_q.triggers_of_agent, "a4", 10)
    r(firings_q.firings_of_trigger, "tr-s", 10)
    r(firings_q.trigger_context, "sf1")
    r(triggers_q.earliest_due)


def normalized(value):
    """memoryview and bytes are one thing to the server (it copies both with bytes())."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    return value


async def test_both_drivers_return_the_same_shapes(tmp_path, postgres_url):
    from seed_agents.server.database.postgres.database import PgDatabase
    from seed_agents.server.database.sqlite.database import Database

    lite, pg = Database(str(tmp_path / "agents.sqlite")), PgDatabase(parse_storage_url(postgres_url))
    await lite.start()
    await pg.start()
    try:
        got_lite, got_pg = await shape_script(lite), await shape_script(pg)
    finally:
        await lite.close()
        await pg.close()
    assert len(got_lite) == len(got_pg)
    for i, (a, b) in enumerate(zip(got_lite, got_pg)):
        assert normalized(a) == normalized(b), f"step {i}: SQLite gave {a!r}, PostgreSQL gave {b!r}"
    # Not both wrong the same way: spot checks of what the contract says.
    by_id = {}
    for value in got_pg:
        if isinstance(value, dict) and "id" in value:
            by_id.setdefault(value["id"], []).append(value)
    s1 = next(v for v in got_pg if isinstance(v, dict) and v.get("id") == "s1" and "activity" in v)
    assert s1["activity"] == {"messageAt": T0 + 11, "messageFrom": "assistant"}
    assert s1["title"] == "renamed" and s1["modelOverride"] == {"provider": "p", "model": "m2"}
    assert s1["childSessionCount"] == 1
    a1 = next(v for v in got_pg if isinstance(v, dict) and v.get("id") == "a1" and "activity" in v)
    assert a1["activity"] == {"at": T0 + 13, "kind": "event", "sessionId": "s1",
                              "messageAt": T0 + 11, "messageFrom": "assistant"}
    r3 = by_id["r3"][0]
    assert (r3["rootRunId"], r3["parentRunId"], r3["depth"]) == ("r1", "r2", 2)
    assert [run["id"] for run in got_pg[got_pg.index(by_id["r4"][0]) + 1]] == ["r1", "r2", "r3", "r4"]


# Store functions the script reaches only through another one (each named with its caller).
CALLED_BY_OTHERS = {
    "roles.guest_role": "roles.agent_role",
    "events.page_of": "events.event_bodies_page, session_view.answer",
    "session_view.fetch_each": "session_view.fetch",
    "parking.wake": "parking.signal, parking.time_out",
    "parking.child_ended": "delegation.children_ended",
    "delegation.spawn_child": "delegation.create_child",
    "turns.start_turn": "delegation.create_child",
    "turns.tree_refusal": "turns.start_turn (a child's)",
    "turns.in_flight_refusal": "turns.start_turn",
    "turns.in_flight": "turns.in_flight_refusal",
    "delegation.children_ended": "delegation.cancel_subtrees",
    "agents.record_activity": "events.append_event",
    "runs.save_run": "runs.move_run",
    "runs.move_run": "runs.set_run_status, runs.cancel_runs, runs.requeue_interrupted",
    "agent_lifecycle.forget_idempotency": "agent_lifecycle.delete_agent",
    "blobs.put": "memory.write_file, attachments.save",
    "blobs.find": "(its SELECT is put's own: the UPDATE ... WHERE sha256 = ? path)",
    "blobs.add_ref": "(the reference count's increment, as put and seal make it)",
    "blobs.append": "uploads.append",
    "blobs.stage": "uploads.begin",
    "blobs.drop_staged": "uploads.abort, uploads.sweep",
    "blobs.release": "memory.write_file (a replaced file), attachments.attach_blob",
    "blobs.release_many": "memory.delete_path, attachments.delete_session_attachments",
    "blobs.next_chunk": "blobs.read_range, blobs.scan",
    "blobs.first_seq_at": "blobs.read_range",
    "memory.link": "memory.write_file",
    "memory.delete_agent_memory": "agent_lifecycle.delete_agent",
    "file_quota.charge": "memory.check_writable, attachments.save",
    "files_lifecycle.delete_agent_files": "agent_lifecycle.delete_agent",
    "files_lifecycle.delete_session_files": "sessions.delete_session",
    "attachments.delete_session_attachments": "sessions.delete_session",
    "uploads.drop_for": "agent_lifecycle.delete_agent, sessions.delete_session",
}
# Modules whose functions are not the shared store's: SQLite's own gate and façade; the run
# leases, which use PostgreSQL's lease columns (tested in their own module).
NOT_SHARED = {"gate", "database", "filemodes", "secrets", "codec", "errors", "leases"}


def store_functions() -> set[str]:
    """Every public function of server/store/*.py whose first parameter is `conn`."""
    import importlib
    import inspect
    import pkgutil

    from seed_agents.server import store as store_package

    found = set()
    for info in pkgutil.iter_modules(store_package.__path__):
        if info.name in NOT_SHARED:
            continue
        module = importlib.import_module(f"seed_agents.server.store.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and not name.startswith("_"):
                params = list(inspect.signature(fn).parameters)
                if params and params[0] == "conn":
                    found.add(f"{info.name}.{name}")
    return found


async def test_the_shape_script_calls_every_store_function(tmp_path):
    """So every statement of the store runs on PostgreSQL in the test above: a new store
    function must be added to `shape_script` (or, if only another one calls it, named in
    CALLED_BY_OTHERS). Runs on SQLite alone, so it holds without PostgreSQL too."""
    from seed_agents.server.database.sqlite.database import Database

    db = Database(str(tmp_path / "agents.sqlite"))
    await db.start()
    called: set[str] = set()
    try:
        await shape_script(db, called)
    finally:
        await db.close()
    missing = store_functions() - called - set(CALLED_BY_OTHERS)
    assert not missing, f"store functions no test runs on both drivers: {sorted(missing)}"

"""The store's conformance tests: the same tests on both drivers, through what the server uses.

The server reaches its store in one way, the storage port (server/storage/port.py): the functions
of `server.store`, run through a façade, `db.write` / `db.read` / `db.aread`. `Database` runs them
on a SQLite file, `PgDatabase` on PostgreSQL (their SQL rewritten by
server/storage/postgres/dialect.py). Each test here runs on every backend of `BACKENDS`
(parametrized), calling the real store functions (and handlers/idempotency.once, as the
handlers do).

"Servers" are separate façade instances on one store: for SQLite, several `Database` objects on
one file (each its own writer thread and connections, as separate processes would have); for
PostgreSQL, several `PgDatabase` objects on one schema (a fresh one per test, tests/pg.py).
"""
from __future__ import annotations

import asyncio

import pytest

from protocol.errors import ProtocolError
from server.handlers import idempotency as idem
from server.storage import parse_storage_url
from server.store import accounts as accounts_q
from server.store import agent_lifecycle as lifecycle_q
from server.store import agents as agents_q
from server.store import codec
from server.store import collaborators as collab_q
from server.store import events as events_q
from server.store import idempotency as idem_q
from server.store import identities as identities_q
from server.store import key_check
from server.store import owners as owners_q
from server.store import provider_removal as removal_q
from server.store import providers as providers_q
from server.store import runs as runs_q
from server.store import secrets_table as secrets_q
from server.store import sessions as sessions_q
from server.store import signatures as sig_q
from server.store.errors import NotFound
from server.storage.errors import SchemaGateError
from server.storage.port import Conn
from server.store.secrets import SecretBox
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
        from server.storage.sqlite.database import Database

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
        from server.storage.postgres.database import PgDatabase

        return PgDatabase(parse_storage_url(where))

    @staticmethod
    def run_sql(where: str, sql: str, params=()) -> None:
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute(sql, params)

    @classmethod
    def set_version(cls, where: str, version: int) -> None:
        cls.run_sql(where, "UPDATE schema_version SET version = %s", (version,))


# A third backend is its folder under server/storage/ and one entry here.
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
                 "close", "close_sync", "process_lock", "read", "aread", "write", "write_nowait", "write_sync"):
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
    await w(accounts_q.add_signer, ACCOUNT, "z6MkSigner", "agent", "bafy-cid", b"\xa1\x01\x02", T0)
    r(accounts_q.is_signer, ACCOUNT, "z6MkSigner")
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
    # Events and the activity rollup of sessions and agents.
    payloads = [user_message("hi"), {"type": "message", "role": "assistant", "content": "hello"},
                {"type": "tool", "name": "search"}, {"type": 7}]
    for i, payload in enumerate(payloads):
        await w(events_q.append_event, "s1", payload, f"e{i}", T0 + 10 + i)
    await w(events_q.append_event, "s3", user_message("other"), "e9", T0 + 9)   # older: no move back
    r(sessions_q.get_session, "s1")
    r(sessions_q.get_session, "s2")
    r(agents_q.get_agent, "a1")
    r(agents_q.list_agents, ACCOUNT)
    r(agents_q.list_agents_page, ACCOUNT, 1, None, 1 << 20)
    r(agents_q.list_agents_page, ACCOUNT, 5, {"updatedBefore": T0 + 1, "idAfter": "a1"}, 1 << 20)
    r(agents_q.definition_size, "a1")
    r(events_q.events_after, "s1", 1, 2)
    r(events_q.event_bodies_after, "s1", 2, 10)
    r(events_q.event_seq, "e1")
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
    r(runs_q.queued_runs_of_session, "s1", 10)
    r(runs_q.active_runs_of_session, "s1")
    tree = r(runs_q.runs_of_tree, "r1", None, 10)
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
    r(collab_q.sessions_page, GUEST, ["a1"], 10, None, True)
    r(collab_q.sessions_page, GUEST, ["a1"], 1, {"updatedBefore": T0 + 100, "idBefore": "s9"}, False)
    await w(collab_q.decline, "a1", GUEST)   # accepted: not an invitation
    await w(collab_q.decline, "a2", GUEST)
    await w(collab_q.set_public_read, "a2", True, T0 + 45)
    r(owners_q.agent_access, "a2")
    r(agents_q.get_agent, "a2", "reader")
    await w(collab_q.remove, "a1", GUEST)
    r(owners_q.session_access, "s3")
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
    box = SecretBox(bytes(range(32)))
    await w(secrets_q.set_secret, ACCOUNT, "sealed", box.seal(b"sk-live", secrets_q.secret_aad(ACCOUNT, "sealed")),
            None, T0 + 56, "4b1d0c7e-0000-4000-8000-000000000005")
    r(secrets_q.read_secret, box, ACCOUNT, "sealed")
    await w(removal_q.delete_provider, ACCOUNT, "p")
    await w(removal_q.delete_provider, ACCOUNT, "p")
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
    r(agents_q.agent_account, "a2")
    # Idempotency records, then deleting a whole agent and a session.
    await w(idem_q.idem_put, ACCOUNT, "CreateSession", "c1", b"fp", b"\xa1aa\x01", T0 + 60)
    r(idem_q.idem_get, ACCOUNT, "CreateSession", "c1")
    await w(lifecycle_q.set_definition, "a2", {"name": "second", "v": 2}, T0 + 61)
    await w(agents_q.set_agent_status, "a2", "running", T0 + 62)
    await w(agents_q.settle_running_agents, T0 + 63)
    await w(agents_q.touch_agent, "a2", T0 + 64)
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
    r(identities_q.list_identities, ACCOUNT)
    r(identities_q.list_identities, ACCOUNT, [name])
    r(identities_q.count_identities, ACCOUNT)
    r(identities_q.missing_names, ACCOUNT, [name, "absent"])
    await w(identities_q.update_identity, ACCOUNT, name, "New", "ipfs://bafyicon", "http://hm", T0 + 71)
    await w(agents_q.create_agent, "a3", ACCOUNT, {"name": "signer", "signingKeys": [name]}, "/tmp/a3", T0 + 72)
    r(identities_q.agents_signing_with, ACCOUNT, name)
    await w(idem_q.idem_put, ACCOUNT, "CreateSigningIdentity", "c2", b"fp",
            codec.encode({"identity": {"name": name}}), T0 + 73)
    await w(identities_q.forget_idempotency, ACCOUNT, name)
    r(idem_q.idem_get, ACCOUNT, "CreateSigningIdentity", "c2")
    await w(identities_q.delete_identity, ACCOUNT, name)
    await w(identities_q.delete_identity, ACCOUNT, name)
    # The shared secrets key: recorded by the first key, accepted again, refused for another.
    await w(key_check.same_key, SecretBox(bytes(32)))
    await w(key_check.same_key, SecretBox(bytes(32)))
    await w(key_check.same_key, SecretBox(bytes([1]) * 32))
    return out


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
    from server.storage.postgres.database import PgDatabase
    from server.storage.sqlite.database import Database

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
    "agents.record_activity": "events.append_event",
    "runs.save_run": "runs.move_run",
    "runs.move_run": "runs.set_run_status, runs.cancel_runs, runs.requeue_interrupted",
    "agent_lifecycle.forget_idempotency": "agent_lifecycle.delete_agent",
}
# Modules whose functions are not the shared store's: SQLite's own gate and façade; the run
# leases, which use PostgreSQL's lease columns (tested in their own module).
NOT_SHARED = {"gate", "database", "filemodes", "secrets", "codec", "errors", "leases"}


def store_functions() -> set[str]:
    """Every public function of server/store/*.py whose first parameter is `conn`."""
    import importlib
    import inspect
    import pkgutil

    import server.store

    found = set()
    for info in pkgutil.iter_modules(server.store.__path__):
        if info.name in NOT_SHARED:
            continue
        module = importlib.import_module(f"server.store.{info.name}")
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
    from server.storage.sqlite.database import Database

    db = Database(str(tmp_path / "agents.sqlite"))
    await db.start()
    called: set[str] = set()
    try:
        await shape_script(db, called)
    finally:
        await db.close()
    missing = store_functions() - called - set(CALLED_BY_OTHERS)
    assert not missing, f"store functions no test runs on both drivers: {sorted(missing)}"

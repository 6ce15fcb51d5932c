"""CreateSession's job in one statement (`created_together`, what a backend with
`traits.batched_reads` runs: the replay claim, the idempotency record, the agent's row and the
caller's grant read, the session and the record written, server/store/session_create.py) answers and writes exactly what
the job of one statement at a time (`created_one_by_one`) does, for every kind of caller and
every idempotency case, on PostgreSQL: two fresh schemas built alike, the same requests run
through each job, then every answer, every row written and every AgentInfo to publish compared.
And the claim in the job: refused (409) before anything is written, held when the job commits."""
from __future__ import annotations

import uuid

import psycopg
import pytest

from seed_agents.protocol.api.actions import CreateSession
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.server.database import parse_storage_url
from seed_agents.server.database.postgres.database import PgDatabase
from seed_agents.server.handlers.sessions import created_one_by_one, created_together
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import codec
from seed_agents.server.store import collaborators as collab_q
from seed_agents.server.store import session_create
from seed_agents.server.store.errors import NotFound, Refused
from seed_agents.server.store.handed_claim import HandedClaim

from tests.pg import postgres_base_url, with_schema  # noqa: F401  (fixtures)

T0 = 1_700_000_000_000
OWNER, READER_, WRITER_, PENDING, STRANGER = "z6MkOwner", "z6MkReader", "z6MkWriter", "z6MkPending", "z6MkStranger"
DEFINITION = {"name": "a", "systemPrompt": "p", "modelProvider": "echo", "model": "echo-1"}
# (caller, agent, title, client id, fingerprint): new sessions, repeats of an id with the same
# request and with another, every role, a missing agent, a visitor of a public-chat agent.
REQUESTS = [
    (OWNER, "a-private", "first", None, b"f1"),
    (OWNER, "a-private", None, "id-1", b"f2"),
    (OWNER, "a-private", None, "id-1", b"f2"),          # the same request again: the first answer
    (OWNER, "a-private", "other", "id-1", b"f3"),        # the id with another request: 409
    (WRITER_, "a-private", "by a writer", "id-1", b"f4"),   # (ids are per account)
    (WRITER_, "a-private", "again", None, b"f5"),
    (READER_, "a-private", "by a reader", None, b"f6"),     # 403
    (PENDING, "a-private", "pending", "id-2", b"f7"),       # 404: a pending grant is none
    (STRANGER, "a-private", "stranger", None, b"f8"),       # 404
    (STRANGER, "a-public", "public read", None, b"f9"),     # 403: readers may not write
    (STRANGER, "a-chat", "visitor", "id-3", b"f10"),        # 403 (the visitor's path follows)
    (OWNER, "a-missing", "nowhere", "id-4", b"f11"),        # 404
    (OWNER, "a-chat", "own chat agent", "id-5", b"f12"),
    (OWNER, "a-chat", "own chat agent", "id-5", b"f12"),
]


def build(conn, state_dir: str) -> None:
    for agent_id in ("a-private", "a-public", "a-chat"):
        agents_q.create_agent(conn, agent_id, OWNER, DEFINITION, f"{state_dir}/{agent_id}", T0)
    conn.execute("UPDATE agents SET public_read = 1 WHERE id = 'a-public'")
    conn.execute("UPDATE agents SET public_chat = ? WHERE id = 'a-chat'", (codec.encode({"limit": 3}),))
    for account, role, accept in ((READER_, "reader", True), (WRITER_, "writer", True), (PENDING, "writer", False)):
        collab_q.invite(conn, "a-private", account, role, T0)
        if accept:
            collab_q.accept(conn, "a-private", account, T0 + 1)


def rows(conn) -> dict:
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("sessions", "idempotency", "agents")}


async def run_all(db: PgDatabase, job) -> list:
    out = []
    for n, (account, agent_id, title, client_id, fingerprint) in enumerate(REQUESTS):
        action = CreateSession(ts=T0, agent_id=agent_id, title=title, client_request_id=client_id)
        try:
            out.append(("ok", await db.write(job, None, account, action, fingerprint, T0 + 10 * n, f"s-{n}")))
        except ProtocolError as refused:
            out.append(("refused", refused.status, refused.message))
        except NotFound as missing:
            out.append(("missing", str(missing)))
    return out


@pytest.fixture
def two_schemas(postgres_base_url):   # noqa: F811
    names = ["t_" + uuid.uuid4().hex[:16] for _ in range(2)]
    with psycopg.connect(postgres_base_url, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield [with_schema(postgres_base_url, name) for name in names]
    finally:
        with psycopg.connect(postgres_base_url, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP SCHEMA {name} CASCADE")


async def test_the_job_in_one_statement_does_what_the_one_at_a_time_job_does(tmp_path, two_schemas, monkeypatch):
    def separately(*args):
        raise AssertionError("the statement's own inserts disagreed with the answer")

    monkeypatch.setattr(session_create, "inserts", separately)   # (its fallback: never needed here)
    results, stored = [], []
    for url, job in zip(two_schemas, (created_one_by_one, created_together)):
        db = PgDatabase(parse_storage_url(url))
        await db.start()
        try:
            await db.write(build, str(tmp_path / "state"))
            results.append(await run_all(db, job))
            stored.append(await db.aread(rows))
        finally:
            await db.close()
    one_by_one, together = results
    assert together == one_by_one
    assert stored[1] == stored[0]
    # The requests cover what they are meant to.
    kinds = [r[0] if r[0] != "refused" else r[1] for r in one_by_one]
    assert kinds == ["ok", "ok", "ok", 409, "ok", "ok", 403, 404, 404, 403, 403, 404, "ok", "ok"]
    assert one_by_one[2][1] == (one_by_one[1][1][0], [])   # a repeat: the first answer, nothing to publish
    assert len(stored[0]["sessions"]) == 5 and len(stored[0]["idempotency"]) == 3
    session, agent = one_by_one[4][1][1][0]
    assert session["account"] == OWNER and agent["updatedAt"] == T0 + 40   # a writer's session is the owner's


async def test_the_claim_in_the_job_is_refused_before_anything_is_written(tmp_path, two_schemas):
    async def make():
        raise AssertionError("the job makes the claim")

    db = PgDatabase(parse_storage_url(two_schemas[0]))
    await db.start()
    try:
        await db.write(build, str(tmp_path / "state"))
        sig = bytes(range(64))
        action = CreateSession(ts=T0, agent_id="a-private", title="t", client_request_id="c-1")
        held = HandedClaim(sig, T0 + 60_000, T0, make=make)
        await db.write(created_together, held, OWNER, action, b"f", T0, "s-held")
        again = HandedClaim(sig, T0 + 60_000, T0 + 1, make=make)
        with pytest.raises(Refused) as refused:
            await db.write(created_together, again, OWNER, action, b"f", T0 + 1, "s-again")
        assert refused.value.status == 409 and again.refused and again.done
        # A failed job (no access) leaves no claim: the dispatcher makes it after (HandedClaim.ensure).
        failed = HandedClaim(bytes(range(1, 65)), T0 + 60_000, T0, make=make)
        with pytest.raises(ProtocolError):
            await db.write(created_together, failed, STRANGER, action, b"f", T0, "s-failed")
        assert not failed.done
        stored = await db.aread(lambda conn: (conn.execute("SELECT id FROM sessions").fetchall(),
                                              conn.execute("SELECT sig FROM accepted_signatures").fetchall()))
        assert stored == ([("s-held",)], [(sig,)])
        # An expired claim is taken over.
        later = HandedClaim(sig, T0 + 200_000, T0 + 100_000, make=make)
        action2 = CreateSession(ts=T0, agent_id="a-private", title="t2")
        await db.write(created_together, later, OWNER, action2, b"g", T0 + 100_000, "s-later")
    finally:
        await db.close()

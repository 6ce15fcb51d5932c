"""GetSession's reads in one round trip (what a backend with `traits.batched_reads` runs:
`session_reads_on_loop`, on the loop's own connection, falling back to `session_reads_together`
on a reader thread) give exactly what the reads one after the other give (`session_reads`), on
SQLite and on PostgreSQL, for every kind of caller and page; and one session stored alike on both
backends reads the same on both."""
from __future__ import annotations

import pytest

from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.server.database import parse_storage_url
from seed_agents.server.handlers.sessions import session_reads, session_reads_on_loop, session_reads_together
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import codec
from seed_agents.server.store import collaborators as collab_q
from seed_agents.server.store import continuations as continuations_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import sessions as sessions_q
from seed_agents.server.store import trigger_firings as firings_q
from seed_agents.server.store.errors import NotFound

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

T0 = 1_700_000_000_000
OWNER, READER_, WRITER_, PENDING, VISITOR, STRANGER = ("z6MkOwner", "z6MkReader", "z6MkWriter", "z6MkPending",
                                                       "z6MkVisitor", "z6MkStranger")
ACCOUNTS = (OWNER, READER_, WRITER_, PENDING, VISITOR, STRANGER)
DEFINITION = {"name": "a", "systemPrompt": "p", "modelProvider": "echo", "model": "echo-1"}
# (session id, after, limit, max bytes): first pages and later ones, pages cut by count and by
# size (the head then is not the one read ahead), stand-ins for events over the bound, past the end.
PAGES = [(after, limit, max_bytes) for after in (0, 3, 10, 29, 40) for limit in (1, 7, 10_000)
         for max_bytes in (1 << 20, 2500, 600)]
SESSIONS = ("s-private", "s-public", "s-visitor", "s-visitor-chat-off", "s-empty", "s-successor", "s-triggered",
            "s-missing")


def build(conn, state_dir: str) -> None:
    """The same world on either backend, with fixed ids and times."""
    for agent_id in ("a-private", "a-public", "a-chat", "a-chat-off"):
        agents_q.create_agent(conn, agent_id, OWNER, DEFINITION, f"{state_dir}/{agent_id}", T0)
    conn.execute("UPDATE agents SET public_read = 1 WHERE id = 'a-public'")
    conn.execute("UPDATE agents SET public_chat = ? WHERE id = 'a-chat'", (codec.encode({"limit": 3}),))
    for account, role, accept in ((READER_, "reader", True), (WRITER_, "writer", True), (PENDING, "writer", False)):
        collab_q.invite(conn, "a-private", account, role, T0)
        if accept:
            collab_q.accept(conn, "a-private", account, T0 + 1)
    sessions = {"s-private": "a-private", "s-public": "a-public", "s-visitor": "a-chat",
                "s-visitor-chat-off": "a-chat-off", "s-empty": "a-private", "s-successor": "a-private",
                "s-triggered": "a-private"}
    for n, (session_id, agent_id) in enumerate(sessions.items()):
        sessions_q.create_session(conn, session_id, OWNER, agent_id, f"title {n}", T0 + n)
    conn.execute("UPDATE sessions SET visitor_id = ? WHERE id IN ('s-visitor', 's-visitor-chat-off')", (VISITOR,))
    for session_id, count in (("s-private", 30), ("s-public", 4), ("s-visitor", 3), ("s-visitor-chat-off", 2),
                              ("s-successor", 5), ("s-triggered", 6)):
        for i in range(1, count + 1):
            size = 900 if i % 11 == 0 else 40 + 10 * i   # every 11th over the smallest page bound
            payload = {"type": "message", "role": "user" if i % 2 else "assistant",
                       "content": [{"type": "text", "text": f"{session_id} {i} " + "x" * size}]}
            events_q.append_event(conn, session_id, payload, f"{session_id}-e{i}", T0 + 100 + i)
    conn.execute("UPDATE session_events SET link = NULL WHERE session_id = 's-private' AND seq = 7")
    continuations_q.record(conn, successor_id="s-successor", predecessor_id="s-private", origin_id="s-private",
                           account_id=OWNER, tool_call_id="call-1", run_id=None, event_id="s-private-e30",
                           reason="full", manifest={"version": 1, "handoff": "go on"}, now=T0 + 500)
    trigger = {"id": "t-1", "account": OWNER, "agentId": "a-private"}
    firings_q.insert_firing(conn, "f-1", trigger, "webhook:k1", "created", T0 + 600, session_id="s-triggered",
                            activity={"summary": "a push", "n": 1},
                            context={"name": "on push", "prompt": "look", "source": {"kind": "webhook"}})


def outcome(read, conn, account: str, session_id: str, after: int, limit: int, max_bytes: int):
    try:
        return ("ok", read(conn, account, session_id, after, limit, max_bytes))
    except ProtocolError as refused:
        return ("refused", refused.status, refused.message)
    except NotFound as missing:
        return ("missing", str(missing))


def every_outcome(db, read) -> dict:
    def all_of(conn):
        return {(account, session_id, *page): outcome(read, conn, account, session_id, *page)
                for account in ACCOUNTS for session_id in SESSIONS for page in PAGES}
    return db.read(all_of)


async def every_outcome_on_loop(db) -> dict:
    out = {}
    for account in ACCOUNTS:
        for session_id in SESSIONS:
            for page in PAGES:
                try:
                    value = ("ok", await session_reads_on_loop(db, account, session_id, *page))
                except ProtocolError as refused:
                    value = ("refused", refused.status, refused.message)
                except NotFound as missing:
                    value = ("missing", str(missing))
                out[(account, session_id, *page)] = value
    return out


async def open_db(kind: str, tmp_path, request):
    if kind == "sqlite":
        from seed_agents.server.database.sqlite.database import Database

        db = Database(str(tmp_path / "agents.sqlite"))
    else:
        from seed_agents.server.database.postgres.database import PgDatabase

        db = PgDatabase(parse_storage_url(request.getfixturevalue("postgres_url")))
    await db.start()
    await db.write(build, str(tmp_path / "state"))
    return db


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_reads_together_answer_as_the_reads_one_by_one(kind, tmp_path, request):
    db = await open_db(kind, tmp_path, request)
    try:
        one_by_one = every_outcome(db, session_reads)
        together = every_outcome(db, session_reads_together)
        on_loop = await every_outcome_on_loop(db)
    finally:
        await db.close()
    assert together == one_by_one
    assert on_loop == one_by_one
    # The world has what the comparison is meant to cover.
    kinds = {(key[0], key[1]): value[0] for key, value in one_by_one.items() if key[2:] == (0, 10_000, 1 << 20)}
    assert kinds[(OWNER, "s-private")] == kinds[(READER_, "s-private")] == kinds[(WRITER_, "s-private")] == "ok"
    assert kinds[(PENDING, "s-private")] == kinds[(STRANGER, "s-private")] == "refused"
    assert kinds[(STRANGER, "s-public")] == "ok"
    assert kinds[(VISITOR, "s-visitor")] == "ok" and kinds[(VISITOR, "s-visitor-chat-off")] == "refused"
    assert kinds[(STRANGER, "s-visitor")] == "refused" and kinds[(OWNER, "s-missing")] == "refused"
    first = one_by_one[(OWNER, "s-private", 0, 10_000, 2500)][1]
    assert first[2] is True and first[4][0] == first[1][-1][0]   # cut by size; its head at its end
    assert one_by_one[(OWNER, "s-triggered", 0, 10_000, 1 << 20)][1][3]["triggerName"] == "on push"
    assert one_by_one[(OWNER, "s-successor", 0, 10_000, 1 << 20)][1][5]["toolCallId"] == "call-1"
    unlinked = one_by_one[(OWNER, "s-private", 0, 7, 1 << 20)][1]
    assert unlinked[4] == (7, None)   # the page's last event is not linked
    (seq, body), = one_by_one[(OWNER, "s-private", 10, 1, 600)][1][1]
    assert seq == 11 and len(body) <= 600   # the stand-in of an event over the bound


async def test_one_session_reads_the_same_on_sqlite_and_postgresql(tmp_path, request):
    request.getfixturevalue("postgres_url")   # (skipped without PostgreSQL, before any work)
    lite = await open_db("sqlite", tmp_path, request)
    try:
        on_sqlite = every_outcome(lite, session_reads)
    finally:
        await lite.close()
    pg = await open_db("postgresql", tmp_path, request)
    try:
        on_postgresql = every_outcome(pg, session_reads_together)
        on_postgresql_loop = await every_outcome_on_loop(pg)
    finally:
        await pg.close()
    assert on_postgresql == on_sqlite
    assert on_postgresql_loop == on_sqlite

"""server/store/tool_events.record, the one place a tool call and its result are written (the
tool loop, InvokeSessionTool, a trigger's tool continuation, a refused delegate call), on both
drivers, and what it returns published once by runtime/turns.publish."""
from __future__ import annotations

import pytest

from seed_agents.server.database import parse_storage_url
from seed_agents.server.runtime import turns
from seed_agents.server.store import accounts as accounts_q
from seed_agents.server.store import agents as agents_q
from seed_agents.server.store import events as events_q
from seed_agents.server.store import journal as journal_q
from seed_agents.server.store import runs as runs_q
from seed_agents.server.store import sessions as sessions_q
from seed_agents.server.store import tool_events
from seed_agents.server.store.errors import NotFound

from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)

OWNER = "z6MkOwner"
T0 = 1_700_000_000_000
CALL = {"type": "tool_call", "id": "k1", "name": "read", "input": {"address": "~/self"}, "actor": "agent"}
RESULT = {"type": "tool_result", "toolCallId": "k1", "name": "read", "output": "me", "actor": "agent"}


@pytest.fixture(params=["sqlite", "postgresql"])
async def db(request, tmp_path):
    if request.param == "sqlite":
        from seed_agents.server.database.sqlite.database import Database

        database = Database(str(tmp_path / "agents.sqlite"))
    else:
        from seed_agents.server.database.postgres.database import PgDatabase

        database = PgDatabase(parse_storage_url(request.getfixturevalue("postgres_url")))
    await database.start()
    try:
        def setup(conn):
            accounts_q.ensure_account(conn, OWNER, T0)
            agents_q.create_agent(conn, "a1", OWNER, {"name": "agent", "model": "m"}, "/tmp/a1", T0)
            sessions_q.create_session(conn, "s1", OWNER, "a1", "one", T0)
            return runs_q.create_run(conn, "r1", OWNER, "a1", "s1", None, T0)

        database.run = await database.write(setup)
        yield database
    finally:
        await database.close()


class Recorder:
    def __init__(self) -> None:
        self.told: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args, **kw: self.told.append((name, *args, *sorted(kw.items())))


def ids():
    counter = iter(range(100))
    return lambda: f"e{next(counter)}"


async def test_a_runs_call_and_result_are_appended_journaled_and_published_in_order(db):
    effects = await db.write(lambda conn: tool_events.record(conn, "s1", [CALL, RESULT], T0 + 1, ids(), run=db.run))
    events = db.read(events_q.events_after, "s1", 0, 10)
    assert [e["event"]["type"] for e in events] == ["tool_call", "tool_result"]
    assert [(s, e["id"]) for s, e, _ in effects.appended] == [("s1", "e0"), ("s1", "e1")]
    journal = db.read(journal_q.entries, "r1", 0, 10)
    assert [(j["entry"]["kind"], j["entry"]["eventSeq"]) for j in journal] == [("call", events[0]["seq"]), ("result", events[1]["seq"])]
    assert [entry["seq"] for _, entry in effects.journal] == [j["seq"] for j in journal]
    assert effects.notices == [] and effects.kick == []
    pub = Recorder()
    turns.publish(pub, None, effects)
    assert [t[0] for t in pub.told] == ["publish_append", "publish_append", "publish_journal", "publish_journal"]


async def test_a_persons_or_triggers_call_tells_the_account_after_the_events(db):
    effects = await db.write(lambda conn: tool_events.record(conn, "s1", [CALL, RESULT], T0 + 1, ids(),
                                                             notice=(OWNER, "a1")))
    assert db.read(journal_q.entries, "r1", 0, 10) == []   # not a run's: no journal
    pub = Recorder()
    turns.publish(pub, None, effects)
    assert [t[0] for t in pub.told] == ["publish_append", "publish_append", "notify_account"]
    assert pub.told[-1] == ("notify_account", OWNER, "session-event", ("agent_id", "a1"), ("session_id", "s1"))


async def test_a_session_gone_writes_nothing(db):
    with pytest.raises(NotFound):
        await db.write(lambda conn: tool_events.record(conn, "nope", [CALL], T0 + 1, ids()))

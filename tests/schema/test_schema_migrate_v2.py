"""A database written by the previous release (schema version 2) is migrated to version 3 when
the server starts on it, and everything in it still works: agents, sessions and their events,
runs, providers and their sealed secrets; the new columns start empty and fill as events come."""
from __future__ import annotations

import asyncio
import os
import re

import apsw

from seed_agents import schema
from seed_agents.protocol.wire import dagcbor
from seed_agents.server.store.secrets import SecretBox, load_secrets_key
from seed_agents.server.store.secrets_table import secret_aad

from tests.conftest import make_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.model_view import without_preamble
from tests.wsraw import V2Client, flatten, keypair

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
API_KEY = "sk-from-version-2"


def write_v2_database(path: str, account: str, base_url: str) -> None:
    """What version 2 of the server left on disk: its DDL (migrations 1 and 2), its rows."""
    conn = apsw.Connection(path)
    for version, sql in schema.migrations():
        if version <= 2:
            conn.execute(sql)
    conn.execute("PRAGMA user_version = 2")
    definition = {"name": "Old", "systemPrompt": "You are old.", "modelProvider": "fake", "model": "m"}
    conn.execute("INSERT INTO agents VALUES ('a1', ?, ?, '/old/agents/a1', 'idle', 100, 200)",
                 (account, dagcbor.encode(definition)))
    conn.execute("INSERT INTO sessions VALUES ('s1', ?, 'a1', 'Kept', 'idle', 2, 110, 200)", (account,))
    for seq, role, text in ((1, "user", "hello"), (2, "assistant", "hi there")):
        event = {"id": f"e{seq}", "sessionId": "s1", "seq": seq, "createdAt": 100 + seq,
                 "event": {"type": "message", "role": role, "content": text}}
        conn.execute("INSERT INTO session_events VALUES ('s1', ?, ?, ?, ?)",
                     (seq, f"e{seq}", 100 + seq, dagcbor.encode(event)))
    conn.execute("INSERT INTO runs VALUES ('r1', ?, 'a1', 's1', 'e1', 'succeeded', 1, 101, 102, NULL)", (account,))
    config = {"type": "custom", "baseUrl": base_url, "secretRefs": {"apiKey": "old-key"}}
    conn.execute("INSERT INTO model_providers VALUES (?, 'fake', ?, 50, 60)", (account, dagcbor.encode(config)))
    conn.execute("INSERT INTO model_providers VALUES (?, 'spare', ?, 51, 61)",
                 (account, dagcbor.encode({"type": "ollama"})))
    box = SecretBox(load_secrets_key(os.path.dirname(path), os.environ))
    conn.execute("INSERT INTO secrets VALUES (?, 'old-key', ?, NULL, 40, 41)",
                 (account, box.seal(API_KEY.encode(), secret_aad(account, "old-key"))))
    conn.close()


async def test_a_version_2_database_is_migrated_and_keeps_everything(tmp_path):
    from seed_agents.server.main import start_server

    a = keypair("A")
    async with FakeOpenAI(Script(chunks=["still", " here"])) as fake:
        config = make_config(tmp_path)
        write_v2_database(config.db_path, a.account_id, fake.base_url)
        running = await start_server(config)
        try:
            c = await V2Client.open(running.url)
            [agent] = (await c.call(a, {"_": "ListAgents"}))["agents"]
            assert agent["id"] == "a1" and agent["definition"]["systemPrompt"] == "You are old."
            assert (agent["accessRole"], agent["publicRead"], agent["busy"]) == ("owner", False, False)
            assert "activity" not in agent and (agent["createdAt"], agent["updatedAt"]) == (100, 200)

            got = await c.call(a, {"_": "GetSession", "sessionId": "s1"})
            assert got["session"]["title"] == "Kept" and "activity" not in got["session"]
            assert [(e["seq"], e["event"]["content"]) for e in got["events"]] == [(1, "hello"), (2, "hi there")]
            assert got["systemPromptMarkdown"] == "You are old."

            listed = (await c.call(a, {"_": "ListModelProviders"}))["providers"]
            by_name = {p["name"]: p for p in listed}
            assert set(by_name) == {"echo", "fake", "spare"}
            assert all(UUID4.fullmatch(p["id"]) for p in listed)
            assert len({p["id"] for p in listed}) == 3
            assert by_name["fake"] == {"id": by_name["fake"]["id"], "name": "fake", "type": "custom",
                                       "hasSecrets": True, "createdAt": 50, "updatedAt": 60}
            assert by_name["spare"]["hasSecrets"] is False
            again = (await c.call(a, {"_": "ListModelProviders"}))["providers"]
            assert again == listed   # the backfilled ids are stored, not made per answer

            # The old provider and its sealed secret still run a turn, after the old events.
            await c.call(a, {"_": "Subscribe", "key": "sessions/s1", "afterSeq": 2})
            await c.call(a, {"_": "MessageSession", "sessionId": "s1", "content": [{"type": "text", "text": "again"}]})
            appends = []
            async with asyncio.timeout(20):
                while len(appends) < 2:
                    appends += flatten(await c.event())
            assert [e["seq"] for e in appends] == [3, 4] and appends[1]["event"]["content"] == "still here"
            assert fake.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
            # (the server's preamble follows the agent's own prompt: tests/model_view.py)
            assert [m["content"] for m in without_preamble(fake.requests[0].body["messages"])] == [
                "You are old.", "hello", "hi there", "again"]
            async with asyncio.timeout(10):
                while True:   # the reply's rollup lands with it; the run settles right after
                    agent = (await c.call(a, {"_": "GetAgent", "agentId": "a1"}))["agent"]
                    if not agent["busy"]:
                        break
            assert agent["activity"] == {"at": appends[1]["createdAt"], "kind": "message", "sessionId": "s1",
                                         "messageAt": appends[1]["createdAt"], "messageFrom": "assistant"}
            # A secret set again keeps a stable id.
            first = (await c.call(a, {"_": "SetSecret", "name": "old-key", "value": b"new"}))["secret"]
            second = (await c.call(a, {"_": "SetSecret", "name": "old-key", "value": b"newer"}))["secret"]
            assert UUID4.fullmatch(first["id"]) and first["id"] == second["id"] and first["createdAt"] == 40
            await c.close()
        finally:
            await running.stop()
    conn = apsw.Connection(config.db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchall()[0][0] == schema.CURRENT_VERSION
        assert conn.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 2
    finally:
        conn.close()

"""Verifiable history over the wire (docs/protocol.md, "Verifiable history"): every session is a
hash-linked chain the server signs, a pinned client checks what it reads, an export is checked
offline by `seed-agents verify`, and a history changed directly in the database (SQLite and
PostgreSQL) is caught by both, naming the event."""
from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from seed_agents.clients.client import AgentsClient
from seed_agents.clients.errors import HistoryError
from seed_agents.clients.history import verify_file
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.api import history
from seed_agents.protocol.wire.keys import Keypair

from tests.clients.test_cli_commands import cli_env, run_cli
from tests.waiting import until

pytestmark = pytest.mark.storages("sqlite", "postgresql")


async def health(server) -> dict:
    def get():
        with urllib.request.urlopen(server.http_url + "/api/health", timeout=5) as r:
            return json.loads(r.read())
    return await asyncio.to_thread(get)   # (the server runs on this test's loop)


async def chat(server, key: Keypair, texts: list[str], **options):
    """A session with the echo agent holding `texts` and their replies: (client, session id)."""
    client = await AgentsClient.connect(server.url, key, **options)
    agent = await client.create_agent({"name": "echo", "systemPrompt": "", "modelProvider": "echo", "model": "echo"})
    session = (await client.create_session(agent["agentId"]))["sessionId"]
    for i, text in enumerate(texts, start=1):
        await client.message_session(session, text)

        async def replied(n=2 * i):
            page = await client.call({"_": "GetSession", "sessionId": session})
            return len([e for e in page["events"] if e["event"].get("type") == "message"]) >= n

        await until(replied, 20)
    return client, session


async def test_heads_are_signed_by_the_key_health_names_and_a_pinned_client_checks_every_page(server):
    key_id = (await health(server))["serverKey"]
    assert key_id.startswith("z6Mk")
    client, session = await chat(server, Keypair.from_seed(bytes([1] * 32)), ["one", "two"], server_key=key_id)
    try:
        head = await client.call({"_": "GetSessionHead", "sessionId": session})
        assert head["seq"] == 4 and head["serverKey"] == key_id and head["head"].startswith("bafy")
        # The chain recomputed from the events as served gives the head the server signed.
        page = await client.get_session(session)   # checked by the client (pinned key)
        check = history.ChainCheck(session)
        check.extend(dagcbor.encode(e) for e in page["events"])
        assert history.cid_text(check.link) == head["head"] == page["head"]["head"]
        # A user message names its envelope, and the chain action returns that envelope.
        user = page["events"][0]["event"]
        assert user["role"] == "user" and user["envelopeCid"].startswith("bafy")
        chain = await client.call({"_": "GetSessionChain", "sessionId": session})
        assert history.cid_text(history.cid_bytes(chain["links"][0]["envelope"])) == user["envelopeCid"]
        assert [e["seq"] for e in chain["links"]] == [1, 2, 3, 4] and chain["head"]["seq"] == 4
        # Page by page, each page under its own head.
        first = await client.get_session(session, limit=3)
        assert first["head"]["seq"] == 3 and first["nextAfterSeq"] == 3
        rest = await client.get_session(session, after_seq=3)
        assert rest["head"]["seq"] == 4
        assert await client.verify_session(session) == 4
        # A v2 replay ends with the head covering it, checked by the client as it arrives.
        async with await client.subscribe(f"sessions/{session}", after_seq=0) as sub:
            seen = []
            async for item in sub:
                if item.get("_") == "append":
                    seen.append(item["event"]["seq"])
                if item.get("_") == "replayed":
                    assert item["head"]["seq"] == 4
                    break
            assert seen == [1, 2, 3, 4]
    finally:
        await client.close()
    # Another key pinned: the same pages are refused.
    stranger = Keypair.from_seed(bytes([9] * 32)).account_id
    other = await AgentsClient.connect(server.url, Keypair.from_seed(bytes([1] * 32)), server_key=stranger)
    try:
        with pytest.raises(HistoryError, match="not signed by the server key"):
            await other.get_session(session)
    finally:
        await other.close()


async def test_a_user_envelope_is_kept_packed_and_answered_as_it_was_signed(server, tmp_path):
    """The row keeps the envelope without what its event holds (the text, the session id, the
    frame and the principals: protocol/api/stored_envelope.py); the chain answer, an export and
    `verify` get the signed bytes back exactly. An event too large to keep whole keeps its
    envelope whole, and so does a row stored before packing."""
    text = "a question of a modest length, asked once and not kept twice " * 8
    client, session = await chat(server, Keypair.from_seed(bytes([4] * 32)), [text])
    try:
        def rows(conn):
            return [(seq, bytes(env)) for seq, env in conn.execute(
                "SELECT seq, envelope FROM session_events WHERE session_id = ? AND envelope IS NOT NULL"
                " ORDER BY seq", (session,)).fetchall()]
        (seq, kept), = await server.app.db.aread(rows)
        chain = await client.call({"_": "GetSessionChain", "sessionId": session})
        signed = chain["links"][0]["envelope"]
        user = (await client.get_session(session))["events"][0]["event"]
        assert history.cid_text(history.cid_bytes(signed)) == user["envelopeCid"]
        # one text part: kept as its ts and signature (0x02), everything else is in the event
        assert kept[:1] == b"\x02" and len(kept) == 74, (kept[:1], len(kept), len(signed))
        # a row stored whole (as every row was before packing) is answered as it is
        await server.app.db.write(lambda conn: conn.execute(
            "UPDATE session_events SET envelope = ? WHERE session_id = ? AND seq = ?", (signed, session, seq)))
        again = await client.call({"_": "GetSessionChain", "sessionId": session})
        assert again["links"][0]["envelope"] == signed
        path = str(tmp_path / "s.car")
        await client.export_session(session, path)
        assert verify_file(path).user_events == 1
    finally:
        await client.close()


async def test_an_export_verifies_offline_and_says_what_it_proves(server, tmp_path):
    key = Keypair.from_seed(bytes([2] * 32))
    client, session = await chat(server, key, ["hello", "again"])
    path = str(tmp_path / "session.car")
    try:
        proof = await client.export_session(session, path)
    finally:
        await client.close()
    assert proof.events == 4 and proof.user_events == 2 and proof.accounts == (key.account_id,)
    code, out, err = await run_cli(cli_env(tmp_path), "verify", path)   # no server needed
    assert code == 0, err
    assert f"session {session}: 4 events, unbroken from 1 to 4" in out
    assert f"2 user messages, each signed by its account ({key.account_id})" in out
    assert f"signed by server key {(await health(server))['serverKey']}" in out
    code, out, err = await run_cli(cli_env(tmp_path), "verify", path, "--server-key",
                                   Keypair.from_seed(bytes(32)).account_id)
    assert code == 1 and "does not verify" in err and "Traceback" not in err


async def test_an_envelope_with_a_field_of_its_own_is_kept_as_signed_and_its_export_verifies(server, tmp_path):
    """A newer client's envelope may carry a top-level field this server does not read: it is
    signed with the rest, so the user event's envelope is the bytes as signed (over v1, the
    frame; over v2, the map's canonical encoding), and the export still verifies (five fields
    encoded again would not: the signature covers the sixth)."""
    from seed_agents.clients.actions import message_session
    from seed_agents.protocol.wire.envelope import ZERO_SIG
    from seed_agents.clients.raw import V1, RawV2, unique_ts

    key = Keypair.from_seed(bytes([3] * 32))
    client, session = await chat(server, key, [])

    def signed(text: str) -> bytes:
        action = {k: v for k, v in message_session(session, text).items() if v is not None}
        envelope = {"type": "AgentsAction", "signer": key.principal, "sig": ZERO_SIG, "account": key.principal,
                    "action": {**action, "ts": unique_ts()}, "via": "a newer client"}
        envelope["sig"] = key.sign(dagcbor.encode(envelope))
        return dagcbor.encode(envelope)

    v1 = await V1.open(server.url)
    v2 = await RawV2.open(server.url, decode=True)
    path = str(tmp_path / "extra.car")
    try:
        await v1.ws.send(signed("over v1"))
        answer = await v1.recv()
        assert answer.get("_") == "MessageSessionResponse", answer
        answer = await v2.request(signed("over v2"))
        assert answer.get("_") == "MessageSessionResponse", answer

        async def replied():
            page = await client.call({"_": "GetSession", "sessionId": session})
            return len([e for e in page["events"] if e["event"].get("type") == "message"]) >= 4

        await until(replied, 20)
        proof = await client.export_session(session, path)
    finally:
        await v1.close()
        await v2.close()
        await client.close()
    assert proof.events == 4 and proof.user_events == 2 and proof.accounts == (key.account_id,)
    assert verify_file(path).user_events == 2


async def test_the_cli_exports_a_session_by_title(server, tmp_path):
    env = cli_env(tmp_path, url=server.http_url)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, agent, err = await run_cli(env, "agents", "create", "--name", "e", "--no-identity")
    assert code == 0, err
    code, session, err = await run_cli(env, "sessions", "create", agent.strip(), "--title", "proof me")
    assert code == 0, err
    code, out, err = await run_cli(env, "send", session.strip(), "hi")
    assert code == 0, err
    path = str(tmp_path / "s.car")
    code, out, err = await run_cli(env, "sessions", "export", "proof me", "--car", path)
    assert code == 0, err
    assert out.startswith(f"wrote {path}\n") and "unbroken from 1 to 2" in out
    assert verify_file(path).events == 2


# Each tamper, done directly in the database: (description, the SQL's effect, the seq it hits).
def _edit(event: dict) -> None:
    event["event"]["content"] = "echo: something else"


def _user_text(event: dict) -> None:
    event["event"]["content"] = "transfer everything"


async def _rewrite(db, session: str, seq: int, change) -> None:  # noqa: ANN001
    def job(conn):
        body = bytes(conn.execute("SELECT body FROM session_events WHERE session_id = ? AND seq = ?",
                                  (session, seq)).fetchone()[0])
        event = dagcbor.decode(body)
        change(event)
        conn.execute("UPDATE session_events SET body = ? WHERE session_id = ? AND seq = ?",
                     (dagcbor.encode(event), session, seq))
    await db.write(job)


async def _drop(db, session: str, seq: int) -> None:  # noqa: ANN001
    def job(conn):
        # a user message goes with its envelope (a column of its row)
        conn.execute("DELETE FROM session_events WHERE session_id = ? AND seq = ?", (session, seq))
    await db.write(job)


async def _swap(db, session: str, a: int, b: int) -> None:  # noqa: ANN001
    def job(conn):
        rows = {seq: bytes(body) for seq, body in conn.execute(
            "SELECT seq, body FROM session_events WHERE session_id = ? AND seq IN (?, ?)", (session, a, b))}
        for seq, other in ((a, b), (b, a)):
            conn.execute("UPDATE session_events SET body = ? WHERE session_id = ? AND seq = ?",
                         (rows[other], session, seq))
    await db.write(job)


TAMPERS = {
    "edit an assistant reply": (lambda db, s: _rewrite(db, s, 4, _edit), 4),
    "drop an event": (lambda db, s: _drop(db, s, 3), 3),
    "swap two events": (lambda db, s: _swap(db, s, 2, 5), 2),
    "change what a user wrote": (lambda db, s: _rewrite(db, s, 3, _user_text), 3),
}


@pytest.mark.parametrize("tamper", list(TAMPERS))
async def test_a_history_changed_in_the_database_is_caught_naming_the_event(server, tmp_path, tamper):
    key_id = (await health(server))["serverKey"]
    client, session = await chat(server, Keypair.from_seed(bytes([3] * 32)), ["a", "b", "c"], server_key=key_id)
    try:
        path = str(tmp_path / "before.car")
        await client.export_session(session, path)   # kept by someone before the change
        change, seq = TAMPERS[tamper]
        await change(server.app.db, session)
        # The client's live check, as a pinned client reads the session...
        with pytest.raises(HistoryError) as caught:
            await client.verify_session(session)
        assert caught.value.seq == seq, caught.value
        assert f"event {seq}" in str(caught.value)
        # ...and an export made now, checked offline.
        after = str(tmp_path / "after.car")
        with pytest.raises(HistoryError) as caught:
            await client.export_session(session, after)
        assert caught.value.seq == seq, caught.value
        code, out, err = await run_cli(cli_env(tmp_path), "verify", after)
        assert code == 1 and f"does not verify (event {seq})" in err, err
        # The export kept from before still verifies: a kept head stays provable.
        assert verify_file(path, key_id).events == 6
    finally:
        await client.close()


async def test_deleting_a_session_deletes_its_chain_and_kept_exports_still_verify(server, tmp_path):
    client, session = await chat(server, Keypair.from_seed(bytes([4] * 32)), ["bye"])
    path = str(tmp_path / "kept.car")
    try:
        await client.export_session(session, path)
        await client.delete_session(session)
        left = await server.app.db.aread(lambda conn: conn.execute(
            "SELECT count(*) FROM session_events WHERE session_id = ?", (session,)).fetchone()[0])
        assert left == 0   # its events, with their links and envelopes
    finally:
        await client.close()
    assert verify_file(path).events == 2


async def test_events_stored_before_chains_are_linked_at_start_and_resume(tmp_path, storage, request):
    """The migration's backfill: links cleared as a pre-chain database has them are written again
    at the next start, in batches that each commit whole, the same links as before."""
    from tests.conftest import running_server, server_config

    cfg = server_config(tmp_path, storage, request)
    async with running_server(cfg) as server:
        client, session = await chat(server, Keypair.from_seed(bytes([5] * 32)), ["x", "y"])
        await client.close()
        links = await server.app.db.aread(lambda conn: [bytes(r[0]) for r in conn.execute(
            "SELECT link FROM session_events WHERE session_id = ? ORDER BY seq", (session,))])
        await server.app.db.write(lambda conn: conn.execute(
            "UPDATE session_events SET link = NULL WHERE session_id = ? AND seq >= 2", (session,)))
    async with running_server(cfg) as server:
        again = await server.app.db.aread(lambda conn: [bytes(r[0]) for r in conn.execute(
            "SELECT link FROM session_events WHERE session_id = ? ORDER BY seq", (session,))])
        assert again == links and len(links) == 4


@pytest.mark.storages("postgresql")
async def test_two_servers_appending_to_one_session_build_one_chain(tmp_path, storage, request):
    """PostgreSQL: two servers on one database append to one session at once; the exported chain
    verifies (the session row's lock orders each append and its link)."""
    from tests.conftest import running_server, server_config

    cfg = server_config(tmp_path, storage, request)
    cfg2 = server_config(tmp_path / "second", storage, request)
    cfg2.storage_url = cfg.storage_url
    key = Keypair.from_seed(bytes([6] * 32))
    async with running_server(cfg) as one, running_server(cfg2) as two:
        a = await AgentsClient.connect(one.url, key)
        b = await AgentsClient.connect(two.url, key)
        try:
            agent = await a.create_agent({"name": "e", "systemPrompt": "", "modelProvider": "echo", "model": "echo"})
            session = (await a.create_session(agent["agentId"]))["sessionId"]
            await asyncio.gather(*(c.message_session(session, f"{n}{i}") for n, c in (("a", a), ("b", b)) for i in range(5)))

            async def all_replied():
                page = await b.call({"_": "GetSession", "sessionId": session})
                return len(page["events"]) >= 20

            await until(all_replied, 30)
            path = str(tmp_path / "two.car")
            proof = await b.export_session(session, path)
            assert proof.events >= 20 and verify_file(path).events == proof.events
        finally:
            await a.close()
            await b.close()

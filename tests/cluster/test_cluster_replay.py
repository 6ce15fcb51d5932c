"""Replay protection holds across servers (issue 16): an envelope accepted by one server is
refused by every other server on the same PostgreSQL database, writes and reads alike, and
the refused copy costs its owner nothing. Two real servers, one fresh PostgreSQL schema."""
from __future__ import annotations

import contextlib

import pytest

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.server.database.url import parse_storage_url

from tests.conftest import make_config
from tests.pg import postgres_base_url, postgres_url  # noqa: F401
from tests.wsraw import V2Client, keypair


@contextlib.asynccontextmanager
async def servers(tmp_path, url: str, n: int):
    from seed_agents.server.main import start_server

    running = []
    try:
        for i in range(n):
            cfg = make_config(tmp_path / f"s{i}")
            cfg.storage_url = parse_storage_url(url)
            running.append(await start_server(cfg))
        yield running
    finally:
        for r in reversed(running):
            await r.stop()


AGENT = {"name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}


@pytest.mark.parametrize("kind", ["write", "read"])
async def test_an_envelope_accepted_by_one_server_is_refused_by_another(tmp_path, postgres_url, kind):
    kp = keypair(f"replayed {kind}")
    async with servers(tmp_path, postgres_url, 2) as (a, b):
        ca, cb = await V2Client.open(a.url), await V2Client.open(b.url)
        try:
            if kind == "read":   # the account must exist for a read to mean anything
                setup = sign_envelope(kp, {"_": "CreateAgent", "definition": AGENT}, ts=unique_ts())
                assert (await ca.request(setup))["_"] == "CreateAgentResponse"
            action = {"_": "CreateAgent", "definition": AGENT} if kind == "write" else {"_": "ListAgents"}
            envelope = sign_envelope(kp, action, ts=unique_ts())
            first = await ca.request(envelope)
            assert first["_"] in ("CreateAgentResponse", "ListAgentsResponse"), first
            again = await cb.request(envelope)
            assert again["_"] == "Error" and again["status"] == 409, again
            assert "already accepted" in again["message"]
            # The refused copy neither bound B's socket to the account nor spent its budget:
            # the owner's next, freshly signed action on B is answered.
            fresh = sign_envelope(kp, {"_": "ListAgents"}, ts=unique_ts())
            listed = await cb.request(fresh)
            assert listed["_"] == "ListAgentsResponse"
            assert len(listed["agents"]) == 1   # one agent, created once, seen from both servers
        finally:
            await ca.close()
            await cb.close()


async def test_one_client_request_id_raced_through_two_servers_makes_one_agent(tmp_path, postgres_url):
    """Idempotency across servers: 36 CreateAgent requests with one clientRequestId, sent at once
    through two servers, make one agent and all get its response; a different request with
    that id is 409."""
    import asyncio

    kp = keypair("idempotent racer")
    async with servers(tmp_path, postgres_url, 2) as (a, b):
        clients = [await V2Client.open(s.url) for s in (a, b) for _ in range(3)]
        try:
            action = {"_": "CreateAgent", "definition": AGENT, "clientRequestId": "only-once"}
            answers = await asyncio.gather(*[
                clients[i % len(clients)].request(sign_envelope(kp, action, ts=unique_ts()))
                for i in range(36)])
            assert {r["_"] for r in answers} == {"CreateAgentResponse"}, answers
            assert len({r["agentId"] for r in answers}) == 1
            listed = await clients[0].request(sign_envelope(kp, {"_": "ListAgents"}, ts=unique_ts()))
            assert len(listed["agents"]) == 1
            other = {"_": "CreateAgent", "definition": {**AGENT, "name": "Other"}, "clientRequestId": "only-once"}
            refused = await clients[-1].request(sign_envelope(kp, other, ts=unique_ts()))
            assert refused["_"] == "Error" and refused["status"] == 409, refused
        finally:
            for c in clients:
                await c.close()


# -- the claims CreateSession and GetSession make in their own statements (server/store/handed_claim.py)

async def _agent_and_session(client, kp) -> tuple[str, str]:
    made = await client.request(sign_envelope(kp, {"_": "CreateAgent", "definition": AGENT}, ts=unique_ts()))
    agent_id = made["agentId"]
    session = await client.request(sign_envelope(kp, {"_": "CreateSession", "agentId": agent_id}, ts=unique_ts()))
    return agent_id, session["sessionId"]


async def _sessions_of(client, kp, agent_id: str) -> list[str]:
    listed = await client.request(sign_envelope(kp, {"_": "ListSessions", "agentId": agent_id}, ts=unique_ts()))
    return sorted(s["id"] for s in listed["sessions"])


@pytest.mark.parametrize("action", ["CreateSession", "GetSession"])
async def test_a_handed_claim_refuses_the_envelope_on_another_server(tmp_path, postgres_url, action):
    """CreateSession makes its claim in its write job and GetSession in its read's round trip:
    the envelope one server answered is refused (409) by the other, and makes nothing there."""
    kp = keypair(f"handed {action}")
    async with servers(tmp_path, postgres_url, 2) as (a, b):
        ca, cb = await V2Client.open(a.url), await V2Client.open(b.url)
        try:
            agent_id, session_id = await _agent_and_session(ca, kp)
            body = ({"_": "CreateSession", "agentId": agent_id, "title": "once"} if action == "CreateSession"
                    else {"_": "GetSession", "sessionId": session_id})
            envelope = sign_envelope(kp, body, ts=unique_ts())
            first = await ca.request(envelope)
            assert first["_"] == f"{action}Response", first
            before = await _sessions_of(ca, kp, agent_id)
            again = await cb.request(envelope)
            assert again["_"] == "Error" and again["status"] == 409 and "already accepted" in again["message"], again
            assert await _sessions_of(cb, kp, agent_id) == before   # nothing made by the copy
            # B did not remember the refused signature as its own: a fresh envelope is answered.
            fresh = await cb.request(sign_envelope(kp, {"_": "GetSession", "sessionId": session_id}, ts=unique_ts()))
            assert fresh["_"] == "GetSessionResponse", fresh
        finally:
            await ca.close()
            await cb.close()


async def test_a_failed_create_session_keeps_its_claim(tmp_path, postgres_url):
    """The claim rides in CreateSession's job; a job that fails (an agent the caller has no
    access to: 404) is rolled back, and the claim is still made before the 404 goes out: the same
    envelope sent to another server is refused as a replay, not run again."""
    kp = keypair("failed create")
    async with servers(tmp_path, postgres_url, 2) as (a, b):
        ca, cb = await V2Client.open(a.url), await V2Client.open(b.url)
        try:
            agent_id, _session_id = await _agent_and_session(ca, kp)
            # Another account: the agent is not theirs (404; run again it would be 404 again).
            sa, sb = await V2Client.open(a.url), await V2Client.open(b.url)
            try:
                stranger = keypair("failed create, someone else")
                envelope = sign_envelope(stranger, {"_": "CreateSession", "agentId": agent_id}, ts=unique_ts())
                first = await sa.request(envelope)
                assert first["_"] == "Error" and first["status"] == 404, first
                again = await sb.request(envelope)
                assert again["_"] == "Error" and again["status"] == 409, again
            finally:
                await sa.close()
                await sb.close()
        finally:
            await ca.close()
            await cb.close()


async def test_one_create_session_envelope_raced_through_three_servers_runs_once(tmp_path, postgres_url):
    """The same CreateSession envelope sent at once to three servers (each claim in a write job
    of its own server's batch): one answer is the session, the others 409, one session made."""
    import asyncio

    kp = keypair("raced create")
    async with servers(tmp_path, postgres_url, 3) as running:
        clients = [await V2Client.open(s.url) for s in running]
        try:
            agent_id, _session_id = await _agent_and_session(clients[0], kp)
            before = await _sessions_of(clients[0], kp, agent_id)
            for round_ in range(4):
                envelope = sign_envelope(kp, {"_": "CreateSession", "agentId": agent_id, "title": f"r{round_}"},
                                         ts=unique_ts())
                answers = await asyncio.gather(*(c.request(envelope) for c in clients))
                made = [r for r in answers if r["_"] == "CreateSessionResponse"]
                assert len(made) == 1, answers
                assert all(r["_"] == "Error" and r["status"] == 409 for r in answers if r not in made), answers
            after = await _sessions_of(clients[1], kp, agent_id)
            assert len(after) == len(before) + 4
        finally:
            for c in clients:
                await c.close()


async def test_a_copy_refused_in_its_handler_charges_nothing_and_binds_nothing(tmp_path, postgres_url):
    """The copy's claim is refused only once its handler ran, after the account was charged and
    the socket bound (as for any action that passed verification): both are undone. Server B
    allows a burst of 4 actions: 6 refused copies later the owner still has its 4 there, and each
    copy's socket then acts for another account (it was left bound to none)."""
    from seed_agents.server.main import start_server

    kp = keypair("copied owner")
    cfg_b = make_config(tmp_path / "b", rate_burst=4, rate_per_second=0.001)
    cfg_b.storage_url = parse_storage_url(postgres_url)
    async with servers(tmp_path, postgres_url, 1) as (a,):
        b = await start_server(cfg_b)
        ca = await V2Client.open(a.url)
        try:
            agent_id, session_id = await _agent_and_session(ca, kp)
            copies = []
            for body in ({"_": "CreateSession", "agentId": agent_id}, {"_": "GetSession", "sessionId": session_id}):
                for _ in range(3):
                    envelope = sign_envelope(kp, body, ts=unique_ts())
                    assert (await ca.request(envelope))["_"] == body["_"] + "Response"
                    copies.append(envelope)
            for n, envelope in enumerate(copies):
                other = keypair(f"copier {n}")   # (an account of its own: each has 4 actions on B)
                socket = await V2Client.open(b.url)
                try:
                    refused = await socket.request(envelope)
                    assert refused["_"] == "Error" and refused["status"] == 409, refused
                    mine = await socket.request(sign_envelope(other, {"_": "ListAgents"}, ts=unique_ts()))
                    assert mine["_"] == "ListAgentsResponse", mine
                finally:
                    await socket.close()
            owner_on_b = await V2Client.open(b.url)
            try:
                for _ in range(4):
                    fresh = await owner_on_b.request(sign_envelope(kp, {"_": "GetSession", "sessionId": session_id},
                                                                   ts=unique_ts()))
                    assert fresh["_"] == "GetSessionResponse", fresh
                over = await owner_on_b.request(sign_envelope(kp, {"_": "ListAgents"}, ts=unique_ts()))
                assert over["_"] == "Error" and over["status"] == 429, over   # (the burst is what it says)
            finally:
                await owner_on_b.close()
        finally:
            await ca.close()
            await b.stop()


async def test_one_message_envelope_raced_through_three_servers_is_one_message(tmp_path, postgres_url):
    """MessageSession makes its claim as the first statement of its write job (with the run it
    queues and claims): the same envelope sent at once to three servers is one answer, two
    409s, one user message and one reply; a copy sent again later is refused too."""
    import asyncio

    kp = keypair("raced message")
    async with servers(tmp_path, postgres_url, 3) as running:
        clients = [await V2Client.open(s.url) for s in running]
        try:
            _agent_id, session_id = await _agent_and_session(clients[0], kp)
            envelope = sign_envelope(kp, {"_": "MessageSession", "sessionId": session_id,
                                          "content": [{"type": "text", "text": "only once"}]}, ts=unique_ts())
            answers = await asyncio.gather(*(c.request(envelope) for c in clients))
            sent = [r for r in answers if r["_"] == "MessageSessionResponse"]
            assert len(sent) == 1, answers
            assert all(r["_"] == "Error" and r["status"] == 409 for r in answers if r not in sent), answers
            again = await clients[2].request(envelope)
            assert again["_"] == "Error" and again["status"] == 409, again

            async def replied() -> list:
                got = await clients[1].request(sign_envelope(kp, {"_": "GetSession", "sessionId": session_id},
                                                             ts=unique_ts()))
                return [(e["event"].get("role"), e["event"].get("content")) for e in got["events"]
                        if e["event"].get("type") == "message"]

            async with asyncio.timeout(20):
                while len(await replied()) < 2:
                    await asyncio.sleep(0.05)
            assert await replied() == [("user", "only once"), ("assistant", "echo: only once")]
        finally:
            for c in clients:
                await c.close()

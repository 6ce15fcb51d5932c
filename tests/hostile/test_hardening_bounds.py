"""Issue 12, finding 5: answers and caches are bounded in bytes, large reads don't hold the event
loop, and replay to a socket that does not read stays within the socket's outbound bound. Each
over real sockets; the server whose memory is measured runs as a child process."""
from __future__ import annotations

import asyncio
import re
import time
import uuid

import httpx

from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.api.actions import MAX_DEFINITION_BYTES
from seed_agents.protocol.wire.envelope import build_envelope
from seed_agents.server.handlers.pages import MAX_ANSWER_BYTES
from seed_agents.server.main import start_server
from seed_agents.server.database.sqlite.database import Database
from seed_agents.server.store import accounts, agents, events, sessions

from tests.conftest import make_config
from tests.hostile_measure import rss
from tests.procs import ServerProcess
from tests.hostile.test_hardening_slow_consumer import RawWebSocket, server_side, shrink_server_send_buffer
from tests.waiting import until
from tests.wsraw import V2Client, keypair, setup_session

BIG = 255_000   # characters of metadata: a definition just under the 256 KiB bound


def definition(name: str, blob_chars: int = 0, prompt: str = "be brief") -> dict:
    d = {"name": name, "systemPrompt": prompt, "modelProvider": "echo", "model": "echo-1"}
    if blob_chars:
        d["metadata"] = {"blob": "x" * blob_chars}
    return d


def metric(text: str, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)"
    m = re.search(r"^" + pattern + r"$", text, re.M)
    assert m, f"no {name}{{{want}}} in /metrics"
    return float(m.group(1))


async def test_a_definition_past_256_kib_is_400_naming_the_field_and_the_limit(server):
    a = keypair("A")
    c = await V2Client.open(server.url)
    try:
        r = await c.call(a, {"_": "CreateAgent", "definition": definition("big", MAX_DEFINITION_BYTES)})
        assert r["_"] == "Error" and r["status"] == 400, r
        assert "CreateAgent.definition" in r["message"] and str(MAX_DEFINITION_BYTES) in r["message"], r
        assert "xxxxxxxxxx" not in r["message"] and len(r["message"]) < 200, r   # never the value
        assert (await c.call(a, {"_": "ListAgents"}))["agents"] == []   # nothing was stored

        r = await c.call(a, {"_": "CreateAgent", "definition": definition("fits", BIG)})
        assert r["_"] == "CreateAgentResponse", r
        agent_id = r["agentId"]
        r = await c.call(a, {"_": "UpdateAgent", "agentId": agent_id,
                             "definition": definition("grown", MAX_DEFINITION_BYTES)})
        assert r["_"] == "Error" and r["status"] == 400, r
        assert "UpdateAgent.definition" in r["message"] and str(MAX_DEFINITION_BYTES) in r["message"], r
        r = await c.call(a, {"_": "GetAgent", "agentId": agent_id})
        assert r["agent"]["definition"]["name"] == "fits"   # unchanged
    finally:
        await c.close()


async def test_list_agents_is_paged_in_bytes_and_others_are_served_meanwhile(tmp_path):
    """150 agents with ~255 KB definitions (37 MB in all): each ListAgents answer stays under
    4 MiB (plus one agent), the pages walk every agent once in order, a GetSession on another
    socket is answered while the walks run, and the server's RSS grows by far less than what
    one unbounded answer would hold."""
    srv = ServerProcess(tmp_path / "srv").start()
    a = keypair("A")
    clients = [await V2Client.open(srv.url) for _ in range(4)]
    other = await V2Client.open(srv.url)
    try:
        small_agent, sid = await setup_session(other, a)
        await other.call(a, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": "hi"}]})
        created = [small_agent]
        for batch in range(0, 150, 25):
            rs = await asyncio.gather(*[clients[i % 4].call(a, {"_": "CreateAgent", "definition": definition(
                f"agent {batch + i}", BIG)}) for i in range(25)])
            assert all(r["_"] == "CreateAgentResponse" for r in rs), rs[0]
            created += [r["agentId"] for r in rs]

        base = peak = rss(srv.proc.pid)
        walking = True

        async def sample():
            nonlocal peak
            while walking:
                peak = max(peak, rss(srv.proc.pid))
                await asyncio.sleep(0.01)   # the sampling interval: a measurement, not a wait

        async def walk(c: V2Client) -> tuple[list[str], list[int]]:
            ids, sizes, cursor = [], [], None
            while True:
                action = {"_": "ListAgents"} if cursor is None else {"_": "ListAgents", "cursor": cursor}
                before = len(c.frames)
                r = await c.call(a, action)
                assert r["_"] == "ListAgentsResponse", r
                sizes.append(len(c.frames[before]))
                ids += [x["id"] for x in r["agents"]]
                cursor = r.get("nextCursor")
                if cursor is None:
                    return ids, sizes

        served = []

        async def get_sessions():
            while walking:
                r = await other.call(a, {"_": "GetSession", "sessionId": sid})
                assert r["_"] == "GetSessionResponse"
                served.append(time.monotonic())

        sampler, getter = asyncio.create_task(sample()), asyncio.create_task(get_sessions())
        t0 = time.monotonic()
        walks = await asyncio.gather(*[walk(c) for c in clients])
        t1 = time.monotonic()
        walking = False
        await asyncio.gather(sampler, getter)
        for ids, sizes in walks:
            assert sorted(ids) == sorted(created) and len(ids) == 151   # each agent once
            assert len(sizes) > 1
            assert max(sizes) <= MAX_ANSWER_BYTES + 2 * MAX_DEFINITION_BYTES, max(sizes)
        during = [t for t in served if t0 <= t <= t1]
        assert len(during) >= 3, (len(during), t1 - t0)   # the other socket kept being answered
        growth = peak - base
        print(f"\nListAgents of 150 x 255 KB: pages of at most {max(max(s) for _, s in walks) / 2**20:.2f} MiB, "
              f"{len(walks[0][1])} pages; RSS +{growth / 2**20:.1f} MiB during 4 concurrent walks; "
              f"{len(during)} GetSession answered meanwhile")
        assert growth < 120 * 2**20, growth   # one unbounded answer of these agents is 37 MB, held several times
        # the newest update first, as before
        r = await clients[0].call(a, {"_": "ListAgents", "limit": 3})
        assert len(r["agents"]) == 3 and "nextCursor" in r
        updated = [x["updatedAt"] for x in r["agents"]]
        assert updated == sorted(updated, reverse=True)
    finally:
        for c in [*clients, other]:
            await c.close()
        srv.kill()


async def test_every_cache_keeps_to_its_byte_budget(tmp_path):
    """Many sessions' histories and many agents' prompts: the caches' bytes (read on /metrics)
    stay within their budgets, and turns and GetSession still answer right."""
    history_budget, prompt_budget = 1 << 20, 256 * 1024
    srv = await start_server(make_config(tmp_path, history_cache_bytes=history_budget,
                                         prompt_cache_bytes=prompt_budget, rate_per_second=1000.0,
                                         rate_burst=1000))
    a = keypair("A")
    c = await V2Client.open(srv.url)
    try:
        prompt = "p" * 90_000
        sids = []
        for i in range(12):
            r = await c.call(a, {"_": "CreateAgent", "definition": definition(f"a{i}", prompt=f"{i} {prompt}")})
            r = await c.call(a, {"_": "CreateSession", "agentId": r["agentId"]})
            sids.append(r["sessionId"])
        text = "t" * 150_000
        for sid in sids:
            r = await c.call(a, {"_": "Subscribe", "key": f"sessions/{sid}"})
            assert r["_"] == "SubscribeResponse"
            r = await c.call(a, {"_": "MessageSession", "sessionId": sid,
                                 "content": [{"type": "text", "text": f"{sid} {text}"}]})
            assert r["_"] == "MessageSessionResponse", r
        for sid in sids:   # every turn finished with its own reply
            async def replied() -> dict | None:
                got = await c.call(a, {"_": "GetSession", "sessionId": sid})
                return got if any(e["event"].get("role") == "assistant" for e in got["events"]) else None

            r = await until(replied, 30, step=0.05, what=f"a reply in {sid}")
            replies = [e for e in r["events"] if e["event"].get("role") == "assistant"]
            assert replies[0]["event"]["content"] == f"echo: {sid} {text}"
            assert r["systemPromptMarkdown"].endswith(prompt)
        async with httpx.AsyncClient() as http:
            text_metrics = (await http.get(srv.http_url + "/metrics")).text
        held = {name: metric(text_metrics, "seed_agents_cache_bytes", cache=name)
                for name in ("history", "system_prompts", "session_owner", "agent_owner", "signers")}
        assert 0 < held["history"] <= history_budget, held   # 12 histories of ~300 KB: most dropped
        assert 0 < held["system_prompts"] <= prompt_budget, held   # 12 prompts of 90 KB: most dropped
        assert metric(text_metrics, "seed_agents_cache_entries", cache="history") < 12
        assert metric(text_metrics, "seed_agents_cache_entries", cache="system_prompts") < 12
        assert metric(text_metrics, "seed_agents_cache_budget_bytes", cache="history") == history_budget
        assert held["session_owner"] > 0 and held["agent_owner"] >= 0   # (signers: none delegated here)
        # a session whose history was dropped still runs its next turn
        r = await c.call(a, {"_": "MessageSession", "sessionId": sids[0], "content": [{"type": "text", "text": "again"}]})
        assert r["_"] == "MessageSessionResponse", r
    finally:
        await c.close()
        await srv.stop()


def populate(db_path: str, account_id: str, sessions_n: int, events_n: int, chars: int) -> list[str]:
    db = Database(db_path)
    db.start_sync()
    agent_id = str(uuid.uuid4())
    ids = [str(uuid.uuid4()) for _ in range(sessions_n)]

    def job(conn):
        accounts.ensure_account(conn, account_id, 1)
        agents.create_agent(conn, agent_id, account_id, definition("a"), "/tmp/x", 1)
        for sid in ids:
            sessions.create_session(conn, sid, account_id, agent_id, None, 1)
            for i in range(events_n):
                events.append_event(conn, sid, {"type": "message", "role": "user", "content": "r" * chars},
                                    str(uuid.uuid4()), 1 + i)

    db.write_sync(job)
    db.close_sync()
    return ids


async def test_replay_to_a_socket_that_does_not_read_stays_within_the_outbound_bound(tmp_path):
    """A socket subscribes to five 2 MB sessions and its account, then reads nothing: what the
    server holds for it stays under the bound (plus the one frame the transport took), replay
    included; live events on top cut it off with 1013 naming the last seq it was sent, and a
    resume from that seq loses nothing."""
    bound = 256 * 1024
    a = keypair("A")
    cfg = make_config(tmp_path, outbound_queue_bytes=bound, slow_close_timeout=10.0,
                      rate_per_second=1000.0, rate_burst=1000)
    sids = await asyncio.to_thread(populate, cfg.db_path, a.account_id, 5, 500, 4000)
    srv = await start_server(cfg)
    raw = None
    writer = await V2Client.open(srv.url)
    try:
        raw = await RawWebSocket.open(srv.port)
        for i, key in enumerate([f"account/{a.account_id}"] + [f"sessions/{s}" for s in sids]):
            await raw.send(dagcbor.encode({"id": 100 + i, "envelope": build_envelope(a, {"_": "Subscribe", "key": key})}))
        def subscribed():
            try:
                conn = server_side(srv, raw)
            except LookupError:
                return None
            return conn if len(conn.subs) >= 6 else None

        stalled = await until(subscribed, 10, step=0.01, what="the six subscriptions on the server")
        shrink_server_send_buffer(srv, raw)
        # from here on it reads nothing; watch what the server holds for it
        peak = 0
        async with httpx.AsyncClient() as http:
            for _ in range(40):
                m = (await http.get(srv.http_url + "/metrics")).text
                peak = max(peak, metric(m, "seed_agents_outbound_bytes_max_socket"))
                await asyncio.sleep(0.025)   # a second of samples while it reads nothing: a measurement
        page = min(1 << 20, bound // 4)
        assert 0 < peak <= bound + 64 * 1024 + page, (peak, bound)
        assert stalled.outbound.queued_bytes <= bound
        assert not stalled.outbound.closed   # a replay waits; it is not cut off for waiting

        # live events on its account key pass the bound: cut off, 1013 naming a session's last seq
        _, live_sid = await setup_session(writer, a)
        for i in range(10):
            await writer.call(a, {"_": "MessageSession", "sessionId": live_sid,
                                  "content": [{"type": "text", "text": f"{i} " + "L" * 60_000}]})
            if stalled.outbound.closed:
                break
        await until(lambda: stalled.outbound.closed, 10, step=0.01, what="the stalled socket closed")
        frames, code, reason = await raw.until_close()
        assert code == 1013, (code, reason)
        m = re.search(r"sessions/([0-9a-f-]+) last seq (\d+)", reason)
        assert m, reason
        named, last = m.group(1), int(m.group(2))
        got = []
        for payload in frames:
            value = dagcbor.decode(payload)
            if value.get("key") == f"sessions/{named}" and value.get("_") == "append":
                got += [e["seq"] for e in value.get("events", [value.get("event")])]
        assert got == list(range(1, len(got) + 1)) and last == (got[-1] if got else 0), (last, got[-3:])
        await raw.answer_close()
        raw.close()
        raw = None

        resumed = await V2Client.open(srv.url)
        r = await resumed.call(a, {"_": "Subscribe", "key": f"sessions/{named}", "afterSeq": last})
        assert r["_"] == "SubscribeResponse"
        seqs = []
        async with asyncio.timeout(20):
            while True:
                value = await resumed.event()
                if value["_"] == "append":
                    seqs += [e["seq"] for e in value.get("events", [value.get("event")])]
                if value["_"] == "replayed":
                    break
        assert got + seqs == list(range(1, 501))
        await resumed.close()
    finally:
        if raw is not None:
            raw.close()
        await writer.close()
        await srv.stop()


async def test_list_sessions_pages_end_before_their_agents_pass_4_mib(tmp_path):
    """ListSessions carries the AgentInfo of each session's agent: 24 sessions of 24 agents with
    ~255 KB definitions (6 MB) come in pages under 4 MiB, every session once."""
    srv = await start_server(make_config(tmp_path, rate_per_second=1000.0, rate_burst=1000))
    a = keypair("A")
    c = await V2Client.open(srv.url)
    try:
        sids = set()
        for i in range(24):
            r = await c.call(a, {"_": "CreateAgent", "definition": definition(f"a{i}", BIG)})
            r = await c.call(a, {"_": "CreateSession", "agentId": r["agentId"]})
            sids.add(r["sessionId"])
        seen, pages, cursor = [], [], None
        while True:
            action = {"_": "ListSessions", "limit": 100}
            if cursor is not None:
                action["cursor"] = cursor
            before = len(c.frames)
            r = await c.call(a, action)
            assert r["_"] == "ListSessionsResponse", r
            pages.append(len(c.frames[before]))
            seen += [s["id"] for s in r["sessions"]]
            assert {s["agentId"] for s in r["sessions"]} == {x["id"] for x in r["agents"]}
            cursor = r.get("nextCursor")
            if cursor is None:
                break
        assert sorted(seen) == sorted(sids) and len(pages) >= 2, pages
        assert max(pages) <= MAX_ANSWER_BYTES, pages
    finally:
        await c.close()
        await srv.stop()


async def test_an_account_has_at_most_1000_model_providers(tmp_path):
    from seed_agents.server.handlers.providers import MAX_PROVIDERS

    srv = await start_server(make_config(tmp_path, rate_per_second=5000.0, rate_burst=5000))
    a = keypair("A")
    clients = [await V2Client.open(srv.url) for _ in range(4)]
    try:
        def provider(i):
            return {"_": "SetModelProvider", "name": f"p{i}", "provider": {"type": "ollama"}}

        for start in range(0, MAX_PROVIDERS, 100):
            rs = await asyncio.gather(*[clients[i % 4].call(a, provider(i)) for i in range(start, start + 100)])
            assert all(r["_"] == "SetModelProviderResponse" for r in rs), rs[0]
        r = await clients[0].call(a, provider(MAX_PROVIDERS))
        assert r["_"] == "Error" and r["status"] == 400 and str(MAX_PROVIDERS) in r["message"], r
        r = await clients[0].call(a, provider(7))   # replacing one by name is still fine
        assert r["_"] == "SetModelProviderResponse", r
        r = await clients[0].call(a, {"_": "ListModelProviders"})
        assert len(r["providers"]) == MAX_PROVIDERS + 1   # with the built-in echo
    finally:
        for c in clients:
            await c.close()
        await srv.stop()

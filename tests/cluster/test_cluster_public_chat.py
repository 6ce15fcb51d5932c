"""Public chat's limits across a cluster: two server child processes on one PostgreSQL schema,
visitors' messages sent to both at once. However they interleave, the admitted total is the
bound: all visitors of an agent at most a quarter of --max-runs-in-flight live at once, one live
run per visitor (each server admits under the locked visitor_usage rows, store/visitors.admit),
and all visitors' tokens for the day reserved at most once."""
from __future__ import annotations

import asyncio

import httpx

from seed_agents.clients.raw import unique_ts
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from tests.cluster.test_cluster_limits import two_servers
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.pg import postgres_base_url, postgres_url  # noqa: F401  (fixtures)
from tests.wsraw import keypair


async def call(http: httpx.AsyncClient, port: int, kp, action: dict) -> dict:  # noqa: ANN001
    r = await http.post(f"http://127.0.0.1:{port}/api/message", content=sign_envelope(kp, action, ts=unique_ts()),
                        headers={"Content-Type": "application/cbor", "Accept": "application/cbor"})
    return dagcbor.decode(r.content, max_size=max(len(r.content), 1), max_items=None)


async def ok(http: httpx.AsyncClient, port: int, kp, action: dict) -> dict:  # noqa: ANN001
    answer = await call(http, port, kp, action)
    assert answer.get("_") == action["_"] + "Response", (action, answer)
    return answer


def text(t: str) -> list:
    return [{"type": "text", "text": t}]


async def test_visitor_limits_hold_across_two_servers(tmp_path, postgres_url):
    a, b = two_servers(tmp_path, postgres_url, ["--max-runs-in-flight", "20", "--session-title-generation", "false"])
    try:
        async with FakeOpenAI(Script(hang=True)) as fake, httpx.AsyncClient(timeout=60) as http:
            owner = keypair("cluster chat owner")
            await ok(http, a.port, owner, {"_": "SetSecret", "name": "k", "value": b"sk-test"})
            await ok(http, a.port, owner, {"_": "SetModelProvider", "name": "p", "provider": {
                "type": "custom", "baseUrl": fake.base_url, "secretRefs": {"apiKey": "k"}}})
            agents = []
            for name in ("many visitors", "one visitor", "one day"):
                agent_id = (await ok(http, a.port, owner, {"_": "CreateAgent", "definition": {
                    "name": name, "systemPrompt": "", "modelProvider": "p", "model": "m"}}))["agentId"]
                limits = {"messagesPerHour": 100, "tokensPerDay": 10**6,
                          "tokensPerDayAll": 50 if name == "one day" else 10**7}
                await ok(http, b.port, owner, {"_": "SetAgentPublicChat", "agentId": agent_id,
                                                   "publicChat": True, "limits": limits})
                agents.append(agent_id)

            async def burst(agent_id: str, visitors: list, per_visitor: int) -> dict[str, int]:
                """Each visitor's sessions made, then one message in each, all at once, half
                through each server; the answers counted by kind."""
                sessions = []
                for n, kp in enumerate(visitors):
                    for _ in range(per_visitor):
                        sid = (await ok(http, (a, b)[n % 2].port, kp, {"_": "CreateSession", "agentId": agent_id}))[
                            "sessionId"]
                        sessions.append((kp, sid))
                answers = await asyncio.gather(*(
                    call(http, (a, b)[n % 2].port, kp, {"_": "MessageSession", "sessionId": sid,
                                                             "content": text(f"hello {n}")})
                    for n, (kp, sid) in enumerate(sessions)))
                counted: dict[str, int] = {}
                for r in answers:
                    key = r["_"] if r["_"] != "Error" else f"{r['status']} {r['message'][:40]}"
                    counted[key] = counted.get(key, 0) + 1
                return counted

            # 12 visitors at once: 5 (20 // 4) are answered, the rest told the agent is busy
            many = await burst(agents[0], [keypair(f"cluster visitor {n}") for n in range(12)], 1)
            print(f"\n12 visitors over two servers: {many}")
            assert many.get("MessageSessionResponse") == 5, many
            assert sum(v for k, v in many.items() if k.startswith("429 this agent is answering")) == 7, many
            # one visitor, six sessions at once: one live run
            one = await burst(agents[1], [keypair("cluster lone visitor")], 6)
            assert one.get("MessageSessionResponse") == 1, one
            assert sum(v for k, v in one.items() if k.startswith("429 your previous message")) == 5, one
            # the agent's day of 50 tokens for all visitors: reserved by the first run admitted
            day = await burst(agents[2], [keypair(f"cluster day visitor {n}") for n in range(4)], 1)
            assert day.get("MessageSessionResponse") == 1, day
            assert sum(v for k, v in day.items() if k.startswith("429 this agent's owner allows its visi")) == 3, day
    finally:
        a.kill()
        b.kill()

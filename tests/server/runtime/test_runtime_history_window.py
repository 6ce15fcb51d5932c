"""What the model sees in a turn far down one session's queue, over the wire: the conversation
before the turn's own message (even when more messages than the runtime's history window are
queued behind it), and none of the messages queued after it."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.server.runtime.runner import HISTORY_EVENTS
from tests.conftest import running_server, server_config
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.model_view import without_preamble
from tests.server.runtime.test_runtime_turns import provider_session, send, session_status
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")

QUEUED = HISTORY_EVENTS + 20   # more than the window holds


def conversation(request) -> list[dict]:
    """A recorded provider request's messages, without the system prompt."""
    return without_preamble(request.body["messages"])[1:]


async def test_a_turn_behind_a_deep_queue_sees_the_conversation_before_its_message(tmp_path, storage, request):
    cfg = server_config(tmp_path, storage, request, rate_burst=10_000, max_runs_in_flight=10_000)
    a = keypair("A")
    async with running_server(cfg) as server, FakeOpenAI(Script(echo=True)) as fake:
        c = await V2Client.open(server.url)
        _, sid = await provider_session(c, a, fake)
        await send(c, a, sid, "m1")
        await fake.wait_for_requests(1, timeout=20)
        await session_status(c, a, sid, "idle", timeout=20)
        gate = asyncio.Event()
        fake.enqueue(Script(echo=True, hold=gate))   # m2's turn runs until the queue is built
        await send(c, a, sid, "m2")
        await fake.wait_for_requests(2, timeout=20)
        await send(c, a, sid, "q0")
        await send(c, a, sid, "q1")   # (in this order; the rest in any)
        for start in range(2, QUEUED, 50):
            await asyncio.gather(*(send(c, a, sid, f"q{i}") for i in range(start, min(QUEUED, start + 50))))
        gate.set()
        await fake.wait_for_requests(4, timeout=60)
        await c.call(a, {"_": "StopSession", "sessionId": sid})

        earlier = [{"role": "user", "content": "m1"}, {"role": "assistant", "content": "echo: m1"},
                   {"role": "user", "content": "m2"}]
        assert conversation(fake.requests[1]) == earlier
        # q0's turn: everything before q0, the reply to m2 that landed after it, q0; no q1...
        assert conversation(fake.requests[2]) == [*earlier, {"role": "assistant", "content": "echo: m2"},
                                                  {"role": "user", "content": "q0"}]
        # and the next turn down the queue moves on by one message and one reply
        assert conversation(fake.requests[3]) == [*earlier, {"role": "user", "content": "q0"},
                                                  {"role": "assistant", "content": "echo: m2"},
                                                  {"role": "assistant", "content": "echo: q0"},
                                                  {"role": "user", "content": "q1"}]
        await c.close()

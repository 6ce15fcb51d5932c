"""Reconnection: a subscription survives a server restart and a slow-consumer cut-off with every
durable event delivered exactly once; requests in flight at a drop fail with status 0."""
from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

import pytest
from websockets.asyncio.server import serve

from seed_agents.clients import AgentsClient, AgentsError
from seed_agents.clients import transport as transport_module
from seed_agents.clients.wire import SUBPROTOCOL, decode_frame
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.server.main import start_server

from tests.conftest import make_config
from tests.waiting import until

ECHO = {"name": "helper", "systemPrompt": "", "modelProvider": "echo", "model": "echo"}


async def wait_for_events(client, session_id, count, timeout=15.0):
    async def events():
        got, page = [], {"nextAfterSeq": 0}
        while "nextAfterSeq" in page:   # a page also ends at 4 MiB of events
            page = await client.get_session(session_id, after_seq=page["nextAfterSeq"])
            got += page["events"]
        return got if len(got) >= count else None
    return await until(events, timeout, what=f"{count} events")


async def appends(sub, last_seq, timeout=15.0):
    got = []
    async with asyncio.timeout(timeout):
        async for item in sub:
            if item["_"] == "append":
                got.append(item["event"])
                if item["event"]["seq"] >= last_seq:
                    return got
    raise AssertionError("subscription ended")


async def test_subscription_survives_a_server_restart_exactly_once(tmp_path):
    first = await start_server(make_config(tmp_path))
    port = first.port
    second = None
    keypair = Keypair.generate()
    states: list[tuple[str, str]] = []
    reader = await AgentsClient.connect(first.url, keypair, on_state=lambda s, d: states.append((s, d)))
    try:
        async with AgentsClient.connect(first.url, keypair) as writer:
            agent_id = (await writer.create_agent(ECHO))["agentId"]
            session_id = (await writer.create_session(agent_id))["sessionId"]
            sub = await reader.subscribe(f"sessions/{session_id}")
            for text in ("one", "two", "three"):
                await writer.message_session(session_id, text)
            await wait_for_events(writer, session_id, 6)
        seen = await appends(sub, 2)  # the caller has taken 2 of 6; 4 wait in buffers

        await first.stop()
        second = await start_server(make_config(tmp_path, port=port))
        async with AgentsClient.connect(second.url, keypair) as writer:
            for text in ("four", "five"):
                await writer.message_session(session_id, text)
        seen += await appends(sub, 10)

        assert [e["seq"] for e in seen] == list(range(1, 11))
        by_role = {"user": [], "assistant": []}
        for e in seen:
            by_role[e["event"]["role"]].append(e["event"]["content"])
        texts = ["one", "two", "three", "four", "five"]
        assert by_role == {"user": texts, "assistant": [f"echo: {t}" for t in texts]}
        assert ("connected", second.url) in states and states[0][0] == "disconnected"
        assert "1001" in states[0][1]
        # and the client is usable for plain calls again
        assert (await reader.get_session(session_id))["session"]["id"] == session_id
    finally:
        await reader.close()
        for running in (first, second):
            if running is not None:
                await running.stop()


@pytest.fixture
def small_socket_buffers(monkeypatch):
    """Client sockets with a small fixed receive buffer: loopback autotuning can buffer tens of
    MB, which would hide a stalled reader from the server for longer than a test should run."""
    real_connect = transport_module.connect

    def connect(url, **options):
        host, port = urlsplit(url).hostname, urlsplit(url).port
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        sock.connect((host, port))
        return real_connect(url, sock=sock, **{**options, "max_queue": 1})

    monkeypatch.setattr(transport_module, "connect", connect)


async def _stall_then_drain(tmp_path, word_size, turns, timeout, **limits):
    """A reader whose caller stops consuming while `turns` echo turns of one `word_size` word run,
    then reads everything: every durable event must arrive exactly once, after a 1013 cut-off."""
    running = await start_server(make_config(tmp_path, **limits))
    keypair = Keypair.generate()
    states: list[tuple[str, str]] = []
    reader = await AgentsClient.connect(running.url, keypair, buffer_size=2,
                                        on_state=lambda s, d: states.append((s, d)))
    try:
        async with AgentsClient.connect(running.url, keypair) as writer:
            agent_id = (await writer.create_agent(ECHO))["agentId"]
            session_id = (await writer.create_session(agent_id))["sessionId"]
            sub = await reader.subscribe(f"sessions/{session_id}")
            words = [chr(ord("a") + i % 26) * word_size + str(i) for i in range(turns)]
            for word in words:
                await writer.message_session(session_id, word)
            await wait_for_events(writer, session_id, 2 * turns, timeout=timeout)
        seen = await appends(sub, 2 * turns, timeout=timeout)
        assert [e["seq"] for e in seen] == list(range(1, 2 * turns + 1))
        assert [e["event"]["content"] for e in seen if e["event"]["role"] == "assistant"] == \
            [f"echo: {w}" for w in words]
        assert any(s == "disconnected" and "1013" in d for s, d in states), states
    finally:
        await reader.close()
        await running.stop()


async def test_slow_consumer_is_cut_off_and_resumes_without_loss(tmp_path, small_socket_buffers):
    await _stall_then_drain(tmp_path, 60_000, 40, 20, outbound_queue_bytes=512 * 1024, replay_page=4)


async def test_slow_consumer_resumes_when_the_backlog_exceeds_the_outbound_bound(tmp_path, small_socket_buffers):
    # One resumed replay page (all the backlog) is far larger than the outbound bound.
    await _stall_then_drain(tmp_path, 150_000, 16, 15, outbound_queue_bytes=256 * 1024)


class FakeServer:
    """A v2 endpoint scripted by `handler`, for drops at exact moments."""

    def __init__(self, handler):
        self.handler = handler

    async def __aenter__(self):
        self.server = await serve(self.handler, "127.0.0.1", 0, subprotocols=[SUBPROTOCOL])
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}/agents/ws"
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()


async def test_a_request_in_flight_when_the_socket_drops_fails_with_status_0():
    async def swallow_then_drop(ws):
        await ws.recv()
        await ws.close(1001, "going away")

    async with FakeServer(swallow_then_drop) as fake:
        client = await AgentsClient.connect(fake.url, Keypair.generate())
        try:
            with pytest.raises(AgentsError) as err:
                await asyncio.wait_for(client.list_agents(), 5)
            assert err.value.status == 0 and err.value.reason == "lost"
            assert fake.url in err.value.message
        finally:
            await client.close()


async def test_without_reconnect_a_drop_ends_subscriptions_with_an_error():
    async def answer_then_drop(ws):
        frame = decode_frame(await ws.recv())
        key = frame["envelope"]["action"]["key"]
        await ws.send(dagcbor.encode({"id": frame["id"], "response": {"_": "SubscribeResponse", "key": key}}))
        await ws.send(dagcbor.encode({"_": "append", "key": key, "events": [
            {"id": "e1", "sessionId": "s", "seq": 1, "event": {"type": "message"}, "createdAt": 1}]}))
        await ws.close(1011, "boom")

    async with FakeServer(answer_then_drop) as fake:
        client = await AgentsClient.connect(fake.url, Keypair.generate(), reconnect=False)
        sub = await client.subscribe("sessions/s")
        assert (await sub.next(5))["event"]["seq"] == 1
        with pytest.raises(AgentsError) as err:
            await sub.next(5)
        assert err.value.status == 0 and "1011" in err.value.message
        with pytest.raises(AgentsError):
            await client.list_agents()
        await client.close()

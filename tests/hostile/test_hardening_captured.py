"""A captured envelope, or junk that names an account, costs that account nothing (issue 12,
finding 2): a socket binds to an account only after one of its actions passed every
verification step (replay included), an account's rate bucket is charged only by envelopes
that verify as that account, and a socket that keeps sending frames that fail verification is
closed 1008. Real sockets to a real server."""
from __future__ import annotations

import asyncio

import pytest

from seed_agents.clients.raw import signed_request_frame, unique_ts
from seed_agents.protocol.wire import dagcbor
from seed_agents.protocol.wire.envelope import sign_envelope
from seed_agents.server.transport.connection import JUNK_CLOSE_REASON

from tests.clocks import StoppedClock
from tests.conftest import running_server, server_config
from tests.waiting import until
from tests.wsraw import V2Client, keypair


def tampered(kp, action: dict) -> bytes:
    """An envelope for `kp`'s account whose signature does not hold (401 at step 4)."""
    env = dagcbor.decode(sign_envelope(kp, action, ts=unique_ts()))
    env["sig"] = bytes(64 - 1) + b"\x01"
    return dagcbor.encode(env)


async def burst(client: V2Client, kp, n: int) -> list[dict]:
    """`n` reads of `kp` sent back to back (all in flight at once), their answers."""
    loop = asyncio.get_running_loop()
    futures = []
    for _ in range(n):
        req_id, fut = client.register()
        futures.append(fut)
        envelope = sign_envelope(kp, {"_": "ListAgents"}, ts=unique_ts())
        await client.ws.send(signed_request_frame(req_id, envelope))
    return list(await asyncio.wait_for(asyncio.gather(*futures), 30))


async def closed(client: V2Client) -> tuple[int | None, str | None]:
    await asyncio.wait_for(client.ws.wait_closed(), 10)
    return client.ws.close_code, client.ws.close_reason


async def send_junk(client: V2Client, frames: list[bytes]) -> None:
    """Send every frame without waiting for answers; the server may close midway."""
    for i, envelope in enumerate(frames):
        try:
            await client.ws.send(signed_request_frame(10_000 + i, envelope))
        except Exception:  # noqa: BLE001 - closed by the server: the rest is not sent
            return


async def test_replays_of_a_captured_envelope_from_64_sockets_do_not_lock_its_owner_out(server):
    url = server.url
    victim = keypair("victim of replays")
    first = await V2Client.open(url)
    strangers: list[V2Client] = []
    try:
        write = sign_envelope(victim, {"_": "CreateAgent", "definition": {
            "name": "Echo", "systemPrompt": "be brief", "modelProvider": "echo", "model": "echo-1"}},
            ts=unique_ts())
        read = sign_envelope(victim, {"_": "ListAgents"}, ts=unique_ts())
        assert (await first.request(write))["_"] == "CreateAgentResponse"
        assert (await first.request(read))["_"] == "ListAgentsResponse"

        # The captured envelopes, replayed once from each of 64 other sockets (the socket limit).
        limit = server.app.config.limits.sockets_per_account
        strangers = await asyncio.gather(*(V2Client.open(url) for _ in range(limit)))
        answers = await asyncio.gather(*(s.request(write if i % 2 else read)
                                         for i, s in enumerate(strangers)))
        assert all(a["_"] == "Error" and a["status"] == 409 for a in answers), answers

        # The owner still gets new sockets (while the replaying sockets stay open), up to its
        # limit: the replays bound nothing.
        mine = [await V2Client.open(url) for _ in range(3)]
        strangers.extend(mine)
        for client in mine:
            r = await client.call(victim, {"_": "ListAgents"})
            assert r["_"] == "ListAgentsResponse", r
        # ...and a stranger socket that was refused can still act for its own account.
        own = keypair("a stranger")
        r = await strangers[0].call(own, {"_": "ListAgents"})
        assert r["_"] == "ListAgentsResponse", r
    finally:
        await asyncio.gather(first.close(), *(s.close() for s in strangers))


async def test_junk_on_the_owners_bound_socket_is_not_charged_to_the_account(server):
    """400 frames signed badly "as" the account on a socket bound to it: the socket is closed
    1008 once past the junk bound, and the account's other socket still has its whole burst."""
    victim = keypair("victim of junk")
    bound, other = await V2Client.open(server.url), await V2Client.open(server.url)
    try:
        assert (await bound.call(victim, {"_": "ListAgents"}))["_"] == "ListAgentsResponse"
        await send_junk(bound, [tampered(victim, {"_": "ListAgents"}) for _ in range(400)])
        code, reason = await closed(bound)
        assert (code, reason) == (1008, JUNK_CLOSE_REASON)

        burst_size = server.app.config.limits.rate_burst * 3 // 4
        answers = await burst(other, victim, burst_size)
        refused = [a for a in answers if a["_"] == "Error"]
        assert not refused, refused[:3]
    finally:
        await asyncio.gather(bound.close(), other.close())


async def test_a_strangers_socket_cannot_bind_to_the_victim_and_drain_its_bucket(server):
    """A stranger replays a captured envelope (which used to bind its socket to the victim),
    then sends junk naming the victim: the victim's bucket is untouched, and the stranger's
    socket is closed 1008."""
    victim = keypair("victim of a stranger")
    mine, stranger = await V2Client.open(server.url), await V2Client.open(server.url)
    try:
        captured = sign_envelope(victim, {"_": "ListAgents"}, ts=unique_ts())
        assert (await mine.request(captured))["_"] == "ListAgentsResponse"
        r = await stranger.request(captured)
        assert r["_"] == "Error" and r["status"] == 409, r
        junk = [captured if i % 2 else tampered(victim, {"_": "ListAgents"}) for i in range(400)]
        await send_junk(stranger, junk)
        code, reason = await closed(stranger)
        assert (code, reason) == (1008, JUNK_CLOSE_REASON)

        answers = await burst(mine, victim, server.app.config.limits.rate_burst * 3 // 4)
        refused = [a for a in answers if a["_"] == "Error"]
        assert not refused, refused[:3]
    finally:
        await asyncio.gather(mine.close(), stranger.close())


@pytest.fixture
async def stopped_rate_clock_server(tmp_path, storage, request):
    """(server, its rate buckets' clock): the clock moves only when the test says, so a burst
    past the bucket is refused the same however slowly a loaded machine sends it."""
    clock = StoppedClock()
    async with running_server(server_config(tmp_path, storage, request, rate_clock=clock)) as running:
        yield running, clock


async def test_an_honest_client_past_its_rate_gets_429_and_keeps_its_socket(stopped_rate_clock_server):
    """Rate limits are not junk: a burst past the bucket is answered 429, the socket stays."""
    server, clock = stopped_rate_clock_server
    kp = keypair("fast but honest")
    client = await V2Client.open(server.url)
    try:
        limits = server.app.config.limits
        answers = await burst(client, kp, limits.rate_burst + limits.unverified_burst + 50)
        limited = [a for a in answers if a["_"] == "Error"]
        assert limited and all(a["status"] == 429 for a in limited), limited[:3]
        assert len(answers) - len(limited) == limits.rate_burst   # no time passed: the burst, no more
        clock.advance(1.0)   # a second's refill
        await until(_answered(client, kp), 10, step=0.05, what="a read once the bucket refilled")
    finally:
        await client.close()


def _answered(client: V2Client, kp):
    """The socket still serves: a read answered once the bucket has refilled enough for one."""
    async def answered() -> bool:
        r = await client.call(kp, {"_": "ListAgents"})
        assert r["_"] == "ListAgentsResponse" or r["status"] == 429, r
        return r["_"] == "ListAgentsResponse"
    return answered

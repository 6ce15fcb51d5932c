"""Turns of an `authMode: 'subscription'` provider through a real server, against a fake that is
both OpenAI's token endpoint and the ChatGPT backend on 127.0.0.1: the reference's request shape
(bearer, `chatgpt-account-id` from the token's claim, the Responses API body), streamed text and
a tool call; the token refreshed before it expires, once for two turns at the same time; a revoked
sign-in marking the provider `needs-login` with one sentence; no token in any frame or log."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from seed_agents.clients.raw import unique_ts

from tests.conftest import running_server, server_config
from tests.fakes.oauth_server import CHATGPT_ACCOUNT, FakeOAuth
from tests.wsraw import V2Client, flatten, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")
PROVIDER = {"type": "openai", "authMode": "subscription", "secretRefs": {"oauth": "openai-subscription-oauth"}}


async def call(c, kp, action):
    return await c.call(kp, action, ts=unique_ts())


async def sign_in(c, kp, fake):
    login = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
    done = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": login["loginId"],
                              "code": fake.authorize(login["authUrl"])})
    assert done["_"] == "SubmitProviderOAuthCodeResponse", done


async def session(c, kp):
    agent = await call(c, kp, {"_": "CreateAgent", "definition": {
        "name": "A", "systemPrompt": "Be brief.", "modelProvider": "chatgpt", "model": "gpt-5.4"}})
    sid = (await call(c, kp, {"_": "CreateSession", "agentId": agent["agentId"]}))["sessionId"]
    await call(c, kp, {"_": "Subscribe", "key": f"sessions/{sid}"})
    return sid


async def turn(c, kp, sid, text="hello", replies=1):
    """The events the turn appended (after the user's message), up to its `replies`-th assistant
    message or an error."""
    r = await call(c, kp, {"_": "MessageSession", "sessionId": sid, "content": [{"type": "text", "text": text}]})
    assert r["_"] == "MessageSessionResponse", r
    got = []
    async with asyncio.timeout(30):
        while True:
            e = await c.event()
            for append in flatten(e):
                event = append["event"]
                if event.get("role") == "user" or append.get("sessionId", sid) != sid:
                    continue
                got.append(event)
                if event["type"] == "error" or sum(e["type"] == "message" for e in got) == replies:
                    return got


def refreshes(fake) -> int:
    return sum(1 for r in fake.token_requests if r.get("grant_type") == "refresh_token")


async def test_a_subscription_turn_with_a_tool_call_refresh_and_revocation(tmp_path, storage, request, caplog):
    caplog.set_level(logging.DEBUG)
    kp = keypair("A")
    async with FakeOAuth(expires_in=10) as fake:   # a token with 10 s left is refreshed first
        cfg = server_config(tmp_path, storage, request, subscription_auth=True,
                            subscription_authorize_url=fake.url("/oauth/authorize"),
                            subscription_token_url=fake.url("/oauth/token"),
                            subscription_base_url=fake.url("/backend-api"), subscription_timeout=1.0,
                            session_title_generation=False)   # (the scripts feed the turns alone)
        async with running_server(cfg) as server:
            c = await V2Client.open(server.url)
            try:
                await sign_in(c, kp, fake)
                fake.expires_in = 3600
                set_ = await call(c, kp, {"_": "SetModelProvider", "name": "chatgpt", "provider": PROVIDER})
                assert set_["provider"]["authMode"] == "subscription" and set_["provider"]["authStatus"] == "ok", set_
                s1, s2 = await session(c, kp), await session(c, kp)

                # Two turns at once with an expiring token: one refresh between them.
                c2 = await V2Client.open(server.url)
                await call(c2, kp, {"_": "Subscribe", "key": f"sessions/{s2}"})
                one, two = await asyncio.gather(turn(c, kp, s1), turn(c2, kp, s2))
                assert one[-1]["type"] == two[-1]["type"] == "message", (one, two)
                assert one[-1]["content"] == two[-1]["content"] == "ok"
                assert refreshes(fake) == 1
                await c2.close()
                request0 = fake.turn_requests[0]
                assert request0["headers"]["authorization"] == "Bearer " + fake.issued[-1]["access_token"]
                assert request0["headers"]["chatgpt-account-id"] == CHATGPT_ACCOUNT
                assert request0["headers"]["openai-beta"] == "responses=experimental"
                body = request0["body"]
                assert body["model"] == "gpt-5.4" and body["stream"] is True and body["store"] is False
                assert "Be brief." in body["instructions"]
                assert body["input"][-1] == {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}
                assert any(t["type"] == "function" and t["name"] == "read" for t in body["tools"])

                # A tool call, then the answer; the second request carries the call and its output.
                fake.replies = [{"text": ["Looking."], "calls": [("call_1", "read", json.dumps({"address": "~/self"}))]},
                                {"text": ["Hel", "lo"]}]
                before = len(fake.turn_requests)
                events = await turn(c, kp, s1, "who are you?", replies=2)
                kinds = [(e["type"], e.get("name") or e.get("role")) for e in events]
                assert kinds == [("message", "assistant"), ("tool_call", "read"), ("tool_result", "read"),
                                 ("message", "assistant")], events
                assert events[-1]["content"] == "Hello"
                follow = fake.turn_requests[before + 1]["body"]["input"]
                assert {"type": "function_call", "call_id": "call_1", "name": "read",
                        "arguments": json.dumps({"address": "~/self"})} in follow
                assert any(i.get("type") == "function_call_output" and i["call_id"] == "call_1" for i in follow)
                assert refreshes(fake) == 1   # the refreshed token is good for an hour

                # A token endpoint that hangs or answers garbage fails the turn on time, and the
                # sign-in stays good (the next turn tries again).
                fake.expires_in = 10
                await sign_in(c, kp, fake)
                for mode in ("garbage", "hang"):
                    fake.mode = mode
                    events = await turn(c, kp, s1, mode)
                    assert events[-1]["type"] == "error" and "tries again" in events[-1]["message"], events
                    listed = await call(c, kp, {"_": "ListModelProviders"})
                    assert next(p for p in listed["providers"] if p["name"] == "chatgpt")["authStatus"] == "ok"
                fake.mode = "ok"

                # Revoked: the token is about to expire and its refresh is refused.
                fake.revoke()
                events = await turn(c, kp, s1, "again")
                assert events[-1]["type"] == "error", events
                message = events[-1]["message"]
                assert "sign in with ChatGPT again" in message and "Traceback" not in message, message
                listed = await call(c, kp, {"_": "ListModelProviders"})
                mine = next(p for p in listed["providers"] if p["name"] == "chatgpt")
                assert mine["authStatus"] == "needs-login", mine
                assert mine["authError"] == "The token endpoint refused the refresh with HTTP 401 (invalid_grant)."

                # Signing in again clears it.
                fake.expires_in = 3600
                await sign_in(c, kp, fake)
                listed = await call(c, kp, {"_": "ListModelProviders"})
                assert next(p for p in listed["providers"] if p["name"] == "chatgpt")["authStatus"] == "ok"
                events = await turn(c, kp, s1, "and now?")
                assert events[-1]["type"] == "message", events

                for issued in fake.issued:
                    for token in (issued["access_token"], issued["refresh_token"]):
                        assert token.encode() not in b"".join(c.frames)
                        assert token not in caplog.text
                assert "Traceback" not in caplog.text
            finally:
                await c.close()


async def test_two_servers_on_one_database_refresh_the_token_once(tmp_path, postgres_url):
    """Four turns at once, spread over two servers sharing one PostgreSQL database, all needing
    a fresh token: the token endpoint sees one refresh, and every turn answers."""
    from tests.cluster.test_cluster_runs import servers

    kp = keypair("A")
    async with FakeOAuth(expires_in=10) as fake:
        settings = dict(subscription_auth=True, subscription_authorize_url=fake.url("/oauth/authorize"),
                        subscription_token_url=fake.url("/oauth/token"),
                        subscription_base_url=fake.url("/backend-api"), session_title_generation=False)
        async with servers(tmp_path, postgres_url, 2) as (one, two):
            for s in (one, two):
                for name, value in settings.items():
                    setattr(s.app.config, name, value)
            # (the runtimes were built before: give each its token keeper as start would have)
            from seed_agents.server.runtime.subscription_tokens import SubscriptionTokens
            for s in (one, two):
                rt = s.app.runtime
                rt.providers.subscription = SubscriptionTokens(rt.db, rt.box, rt.http, s.app.config, rt.now_ms)
                rt.providers.subscription_base_url = settings["subscription_base_url"]
            c1, c2 = await V2Client.open(one.url), await V2Client.open(two.url)
            try:
                await sign_in(c1, kp, fake)
                fake.expires_in = 3600
                await call(c1, kp, {"_": "SetModelProvider", "name": "chatgpt", "provider": PROVIDER})
                # One client per session (each turn reads its own client's events), two per server.
                clients = [c1, c2, await V2Client.open(one.url), await V2Client.open(two.url)]
                extra = clients[2:]
                sessions = [await session(c, kp) for c in clients]
                replies = await asyncio.gather(*(turn(c, kp, sid) for c, sid in zip(clients, sessions)))
                for c in extra:
                    await c.close()
                assert all(r[-1]["type"] == "message" and r[-1]["content"] == "ok" for r in replies), replies
                assert refreshes(fake) == 1
                made = one.app.runtime.providers.subscription.refreshes + two.app.runtime.providers.subscription.refreshes
                assert made == 1
            finally:
                await c1.close()
                await c2.close()

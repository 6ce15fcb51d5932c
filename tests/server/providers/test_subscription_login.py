"""Subscription sign-in ("Sign in with ChatGPT") against a real server and a fake authorization
server on 127.0.0.1: the four actions, PKCE and state, the redirect or the bare code, one pending
login per account and provider type, expiry, cancel, the operator flag in health, and each hostile
case (a forged state, a replayed code, another account's login, a token endpoint that answers
garbage, too much, or nothing), with no token in any frame or log line."""
from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from seed_agents.protocol.api.actions_oauth import parse_authorization_input
from seed_agents.server.store import secrets_table

from tests.conftest import running_server, server_config
from tests.fakes.oauth_server import CHATGPT_ACCOUNT, FakeOAuth
from tests.waiting import until
from tests.wsraw import V2Client, keypair

pytestmark = pytest.mark.storages("sqlite", "postgresql")


def test_parse_authorization_input_takes_every_form_the_reference_takes():
    assert parse_authorization_input("http://localhost:1455/auth/callback?code=c1&state=s1") == ("c1", "s1")
    assert parse_authorization_input("  code=c2&state=s2 ") == ("c2", "s2")
    assert parse_authorization_input("c3#s3") == ("c3", "s3")
    assert parse_authorization_input("c4") == ("c4", None)
    assert parse_authorization_input("   ") == (None, None)
    assert parse_authorization_input("http://localhost:1455/auth/callback?state=s5") == (None, "s5")


async def call(c, kp, action):
    from seed_agents.clients.raw import unique_ts
    return await c.call(kp, action, ts=unique_ts())


def frames_text(c) -> bytes:
    return b"".join(c.frames)


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


async def started(tmp_path, storage, request, fake, **settings):
    cfg = server_config(tmp_path, storage, request, subscription_auth=True,
                        subscription_authorize_url=fake.url("/oauth/authorize"),
                        subscription_token_url=fake.url("/oauth/token"), **settings)
    return running_server(cfg)


async def test_off_by_default_and_said_in_health(tmp_path, storage, request):
    async with running_server(server_config(tmp_path, storage, request)) as server:
        async with httpx.AsyncClient() as http:
            health = (await http.get(server.http_url + "/api/health")).json()
        assert health["subscriptionAuth"] is False
        c = await V2Client.open(server.url)
        try:
            r = await call(c, keypair("A"), {"_": "StartProviderOAuth", "providerType": "openai"})
            assert r["_"] == "Error" and r["status"] == 403 and "--subscription-auth" in r["message"], r
        finally:
            await c.close()


async def test_sign_in_with_the_redirect_url_stores_sealed_credentials(tmp_path, storage, request, logs):
    kp = keypair("A")
    async with FakeOAuth() as fake, await started(tmp_path, storage, request, fake) as server:
        async with httpx.AsyncClient() as http:
            health = (await http.get(server.http_url + "/api/health")).json()
        assert health["subscriptionAuth"] is True
        c = await V2Client.open(server.url)
        try:
            bad = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "anthropic"})
            assert bad["_"] == "Error" and bad["status"] == 400 and "anthropic" in bad["message"], bad

            started_ = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            assert started_["_"] == "StartProviderOAuthResponse", started_
            url = started_["authUrl"]
            assert url.startswith(fake.url("/oauth/authorize") + "?")
            query = parse_qs(urlsplit(url).query)
            assert query["code_challenge_method"] == ["S256"] and len(query["state"][0]) >= 32
            assert query["scope"] == ["openid profile email offline_access"]
            status = await call(c, kp, {"_": "GetProviderOAuthStatus", "loginId": started_["loginId"]})
            assert status == {"_": "ProviderOAuthStatusResponse", "loginId": started_["loginId"], "status": "pending"}

            redirect = fake.authorize(url)
            done = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": started_["loginId"], "code": redirect})
            assert done == {"_": "SubmitProviderOAuthCodeResponse"}, done
            status = await call(c, kp, {"_": "GetProviderOAuthStatus", "loginId": started_["loginId"]})
            assert status["status"] == "completed" and status["secretName"] == "openai-subscription-oauth", status

            # Sealed like every secret: ciphertext in the store, opening only with this row's binding.
            issued = fake.issued[-1]

            def read(conn):
                return conn.execute("SELECT account_id, ciphertext FROM secrets WHERE name = ?",
                                    ("openai-subscription-oauth",)).fetchall()
            rows = await server.app.db.aread(read)
            assert len(rows) == 1
            account, sealed = rows[0]
            assert issued["access_token"].encode() not in bytes(sealed)
            opened = json.loads(server.app.secrets.open(bytes(sealed), secrets_table.secret_aad(account, "openai-subscription-oauth")))
            assert opened["access"] == issued["access_token"] and opened["refresh"] == issued["refresh_token"]
            assert opened["accountId"] == CHATGPT_ACCOUNT and opened["expires"] > 0

            # A replayed redirect: the login is over (409), and the code is spent at the endpoint too.
            again = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": started_["loginId"], "code": redirect})
            assert again["_"] == "Error" and again["status"] == 409, again
            second = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            spent_code = parse_qs(urlsplit(redirect).query)["code"][0]
            replay = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": second["loginId"], "code": spent_code})
            assert replay["_"] == "Error" and replay["status"] == 502 and "HTTP 400 (invalid_grant)" in replay["message"], replay

            for token in (issued["access_token"], issued["refresh_token"]):
                assert token.encode() not in frames_text(c)
                assert token not in logs.text
            assert spent_code not in logs.text
        finally:
            await c.close()


async def test_bare_code_cancel_replace_other_account_and_forged_state(tmp_path, storage, request, logs):
    a, b = keypair("A"), keypair("B")
    async with FakeOAuth() as fake, await started(tmp_path, storage, request, fake) as server:
        ca, cb = await V2Client.open(server.url), await V2Client.open(server.url)
        try:
            # Another account can neither see, finish nor cancel A's login: "not found".
            first = await call(ca, a, {"_": "StartProviderOAuth", "providerType": "openai"})
            redirect = fake.authorize(first["authUrl"])
            for action in ({"_": "GetProviderOAuthStatus", "loginId": first["loginId"]},
                           {"_": "SubmitProviderOAuthCode", "loginId": first["loginId"], "code": redirect},
                           {"_": "CancelProviderOAuth", "loginId": first["loginId"]}):
                r = await call(cb, b, action)
                assert r["_"] == "Error" and r["status"] == 404, r
            assert not fake.token_requests   # B's submit never reached the token endpoint

            # One pending login per account and provider type: a new one replaces the first.
            second = await call(ca, a, {"_": "StartProviderOAuth", "providerType": "openai"})
            old = await call(ca, a, {"_": "GetProviderOAuthStatus", "loginId": first["loginId"]})
            assert old["status"] == "failed" and "newer" in old["error"], old
            # B's own login is untouched by A's.
            b_login = await call(cb, b, {"_": "StartProviderOAuth", "providerType": "openai"})

            # A forged state (the first login's redirect offered to the second) fails that login.
            forged = await call(ca, a, {"_": "SubmitProviderOAuthCode", "loginId": second["loginId"], "code": redirect})
            assert forged["_"] == "Error" and forged["status"] == 400 and "state mismatch" in forged["message"], forged
            status = await call(ca, a, {"_": "GetProviderOAuthStatus", "loginId": second["loginId"]})
            assert status["status"] == "failed" and "State mismatch" in status["error"]
            assert not fake.token_requests

            # Cancel: the login fails with its reason; submitting afterwards is 409.
            cancel = await call(cb, b, {"_": "CancelProviderOAuth", "loginId": b_login["loginId"]})
            assert cancel == {"_": "CancelProviderOAuthResponse", "loginId": b_login["loginId"]}
            status = await call(cb, b, {"_": "GetProviderOAuthStatus", "loginId": b_login["loginId"]})
            assert status["status"] == "failed" and status["error"] == "Sign-in canceled."
            late = await call(cb, b, {"_": "SubmitProviderOAuthCode", "loginId": b_login["loginId"],
                                      "code": fake.authorize(b_login["authUrl"])})
            assert late["_"] == "Error" and late["status"] == 409

            # The bare code (no state) completes a fresh login.
            third = await call(ca, a, {"_": "StartProviderOAuth", "providerType": "openai"})
            code = parse_qs(urlsplit(fake.authorize(third["authUrl"])).query)["code"][0]
            done = await call(ca, a, {"_": "SubmitProviderOAuthCode", "loginId": third["loginId"], "code": code})
            assert done == {"_": "SubmitProviderOAuthCodeResponse"}, done
            for token in (fake.issued[-1]["access_token"], fake.issued[-1]["refresh_token"]):
                assert token.encode() not in frames_text(ca) and token not in logs.text
        finally:
            await ca.close()
            await cb.close()


@pytest.mark.parametrize("mode, phrase", [
    ("garbage", "something other than a JSON token"),
    ("huge", "larger than 65536 bytes"),
    ("hang", "did not answer within 1 seconds"),
    ("refuse", "HTTP 400 (invalid_grant)"),
])
async def test_a_token_endpoint_that_misbehaves_fails_the_login_clearly(tmp_path, storage, request, logs, mode, phrase):
    kp = keypair("A")
    async with FakeOAuth() as fake, await started(tmp_path, storage, request, fake, subscription_timeout=1.0) as server:
        c = await V2Client.open(server.url)
        try:
            login = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            fake.mode = mode
            loop = asyncio.get_running_loop()
            began = loop.time()
            r = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": login["loginId"],
                                   "code": fake.authorize(login["authUrl"])})
            assert loop.time() - began < 10
            assert r["_"] == "Error" and r["status"] == 502 and phrase in r["message"], r
            assert "\n" not in r["message"] and "Traceback" not in logs.text
            status = await call(c, kp, {"_": "GetProviderOAuthStatus", "loginId": login["loginId"]})
            assert status["status"] == "failed" and phrase in status["error"]
            # The server keeps serving.
            assert (await call(c, kp, {"_": "ListModelProviders"}))["_"] == "ListModelProvidersResponse"
        finally:
            await c.close()


async def test_a_login_expires(tmp_path, storage, request):
    kp = keypair("A")
    async with FakeOAuth() as fake, await started(tmp_path, storage, request, fake,
                                                   subscription_login_timeout=0.5) as server:
        c = await V2Client.open(server.url)
        try:
            login = await call(c, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            assert login["expiresAt"] - server.app.now_ms() <= 500

            async def failed():
                s = await call(c, kp, {"_": "GetProviderOAuthStatus", "loginId": login["loginId"]})
                return s if s.get("status") == "failed" else None
            status = await until(failed, 10)
            assert status["error"] == "Sign-in timed out."
            r = await call(c, kp, {"_": "SubmitProviderOAuthCode", "loginId": login["loginId"],
                                   "code": fake.authorize(login["authUrl"])})
            assert r["_"] == "Error" and r["status"] in (404, 409), r
            assert not fake.token_requests
        finally:
            await c.close()


async def test_a_login_started_on_one_server_is_finished_on_another(tmp_path, postgres_url):
    """Behind a load balancer with no sticky sessions: the login lives in the shared database, so
    the server that takes the redirect need not be the one that started it."""
    from tests.cluster.test_cluster_runs import servers

    kp = keypair("A")
    async with FakeOAuth() as fake, servers(tmp_path, postgres_url, 2) as (one, two):
        for s in (one, two):
            s.app.config.subscription_auth = True
            s.app.config.subscription_authorize_url = fake.url("/oauth/authorize")
            s.app.config.subscription_token_url = fake.url("/oauth/token")
        c1, c2 = await V2Client.open(one.url), await V2Client.open(two.url)
        try:
            login = await call(c1, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            status = await call(c2, kp, {"_": "GetProviderOAuthStatus", "loginId": login["loginId"]})
            assert status["status"] == "pending", status
            done = await call(c2, kp, {"_": "SubmitProviderOAuthCode", "loginId": login["loginId"],
                                       "code": fake.authorize(login["authUrl"])})
            assert done == {"_": "SubmitProviderOAuthCodeResponse"}, done
            status = await call(c1, kp, {"_": "GetProviderOAuthStatus", "loginId": login["loginId"]})
            assert status["status"] == "completed" and status["secretName"] == "openai-subscription-oauth"
            again = await call(c1, kp, {"_": "SubmitProviderOAuthCode", "loginId": login["loginId"],
                                        "code": fake.authorize(login["authUrl"])})
            assert again["_"] == "Error" and again["status"] == 409, again
            # A newer login started on one server replaces one started on the other; a cancel on
            # either is seen by both.
            first = await call(c2, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            second = await call(c1, kp, {"_": "StartProviderOAuth", "providerType": "openai"})
            old = await call(c2, kp, {"_": "GetProviderOAuthStatus", "loginId": first["loginId"]})
            assert old["status"] == "failed" and "newer" in old["error"], old
            await call(c2, kp, {"_": "CancelProviderOAuth", "loginId": second["loginId"]})
            gone = await call(c1, kp, {"_": "GetProviderOAuthStatus", "loginId": second["loginId"]})
            assert gone["status"] == "failed" and gone["error"] == "Sign-in canceled."
            # The verifier is kept sealed: it is nowhere in the row as text.
            rows = await one.app.db.aread(lambda conn: conn.execute(
                "SELECT verifier, state FROM provider_logins").fetchall())
            for verifier, state in rows:
                assert len(bytes(verifier)) > 64 and state
            assert len(fake.token_requests) == 1
        finally:
            await c1.close()
            await c2.close()

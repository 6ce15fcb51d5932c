"""Subscription sign-in: StartProviderOAuth, SubmitProviderOAuthCode, GetProviderOAuthStatus and
CancelProviderOAuth, behind the operator's `--subscription-auth` (off by default, as the reference).

The state machine is the reference's (`agents/src/provider-oauth.ts`): a login is `pending` until
its code is traded for tokens (`completed`, naming the secret the provider references as
`secretRefs.oauth`) or it fails, is canceled, replaced by a newer login of the same account and
provider type, or outlives `--subscription-login-timeout` (`failed`, with one sentence). Logins
belong to the account that started them: another account's loginId is "not found". Unlike the
reference, a login is kept in the database (server/store/provider_logins.py, the verifier sealed
with the secrets key), so behind a load balancer any server can finish, read or cancel a login
another one started; finished logins stay readable for as long again so a polling client sees
how they ended.

Unlike the reference, SubmitProviderOAuthCode answers once the exchange is over: success, or the
one sentence the status also shows. The credentials are sealed like every secret (`SetSecret`'s
box and row binding) under `<type>-subscription-oauth`; a token is never in an answer or a log.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid

from seed_agents.protocol.api.actions_oauth import OAUTH_PROVIDER_TYPES, parse_authorization_input
from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..clock import new_id
from ..providers import subscription_login as flow
from ..store import provider_logins as logins_q
from ..store import secrets_table as secrets_q
from .context import HandlerContext

log = logging.getLogger("seed_agents.providers.subscription")

# Logins one account may hold (pending or finished and not yet swept): one pending per provider
# type, the rest finished; the oldest finished ones go first.
MAX_LOGINS_PER_ACCOUNT = 8
# Logins held in all, over every account: past it a start is refused (503) until some expire.
MAX_LOGINS = 10_000
# How long past --subscription-timeout a claimed exchange holds a login (a server that died in
# the middle of one holds it no longer).
EXCHANGE_SLACK_MS = 5_000


def secret_name(provider_type: str) -> str:
    """The stable per-account secret a sign-in's credentials land in (the reference's name), so
    signing in again overwrites them in place."""
    return f"{provider_type}-subscription-oauth"


def verifier_aad(account_id: str, login_id: str) -> bytes:
    """The additional data a login's verifier is sealed with: its row, and that it is a verifier."""
    return f"provider-login\x00{account_id}\x00{login_id}".encode()


def _ttl_ms(ctx) -> int:  # noqa: ANN001
    return int(ctx.config.subscription_login_timeout * 1000)


async def _get(ctx, account_id: str, login_id: str) -> dict:  # noqa: ANN001
    login = await ctx.db.aread(logins_q.get, account_id, login_id, ctx.now_ms())
    if login is None:
        raise ProtocolError(404, "Sign-in not found")
    return login


async def start_provider_oauth(ctx: HandlerContext, env, action) -> dict:
    if not ctx.config.subscription_auth:
        raise ProtocolError(403, "Subscription sign-in is not enabled on this server (--subscription-auth)")
    if action.provider_type not in OAUTH_PROVIDER_TYPES:
        raise ProtocolError(400, f"StartProviderOAuth.providerType: provider type "
                                 f"{quote(action.provider_type)} does not support subscription sign-in "
                                 f"(supported: {', '.join(OAUTH_PROVIDER_TYPES)})")
    now = ctx.now_ms()
    pkce = flow.begin(ctx.config.subscription_authorize_url)
    login_id = str(uuid.uuid4())
    sealed = ctx.secrets.seal(pkce.verifier.encode(), verifier_aad(env.account_id, login_id))
    expires_at = now + _ttl_ms(ctx)

    def job(conn):
        logins_q.sweep(conn, now, _ttl_ms(ctx))
        return logins_q.start(conn, login_id, env.account_id, action.provider_type, sealed, pkce.state, now,
                              expires_at, MAX_LOGINS_PER_ACCOUNT, MAX_LOGINS)
    if not await ctx.db.write(job):
        raise ProtocolError(503, "Too many sign-ins are pending on this server; try again in a few minutes")
    return {"_": "StartProviderOAuthResponse", "loginId": login_id, "authUrl": pkce.url, "expiresAt": expires_at}


async def submit_provider_oauth_code(ctx: HandlerContext, env, action) -> dict:
    account_id = env.account_id
    login = await _get(ctx, account_id, action.login_id)
    if login["status"] != "pending":
        raise ProtocolError(409, f"Sign-in is no longer pending (it {_ended(login)})")
    code, state = parse_authorization_input(action.code)
    if state is not None and state != login["state"]:
        # A redirect from another login (or a forged one): this login cannot be trusted any more.
        await ctx.db.write(logins_q.fail, login["id"], "State mismatch: the redirect is not from this sign-in.",
                           ctx.now_ms())
        raise ProtocolError(400, "SubmitProviderOAuthCode.code: state mismatch: the redirect is not from this "
                                 "sign-in (start a new one)")
    if not code:
        raise ProtocolError(400, "SubmitProviderOAuthCode.code: no authorization code in it (paste the whole "
                                 "redirect URL, or the code)")
    now = ctx.now_ms()
    until = now + int(ctx.config.subscription_timeout * 1000) + EXCHANGE_SLACK_MS
    login, outcome = await ctx.db.write(logins_q.claim, account_id, action.login_id, now, until)
    if outcome == "missing":
        raise ProtocolError(404, "Sign-in not found")
    if outcome == "ended":
        raise ProtocolError(409, f"Sign-in is no longer pending (it {_ended(login)})")
    if outcome == "exchanging":
        raise ProtocolError(409, "A code for this sign-in is already being exchanged")
    verifier = ctx.secrets.open(login["verifier"], verifier_aad(account_id, login["id"])).decode()
    # A task of its own: a client that goes away mid-exchange does not cancel it half-way.
    task = asyncio.ensure_future(_exchange(ctx, login, code, verifier))
    await asyncio.shield(task)
    done = await _get(ctx, account_id, login["id"])
    if done["status"] == "completed":
        return {"_": "SubmitProviderOAuthCodeResponse"}
    # The token endpoint failed it (502), or a cancel, a newer login or the timeout did (409).
    raise ProtocolError(502 if done["exchange_failed"] else 409, done["error"] or "The sign-in failed.")


async def _exchange(ctx, login: dict, code: str, verifier: str) -> None:  # noqa: ANN001
    config = ctx.config
    login_id, account_id = login["id"], login["account_id"]
    try:
        credentials = await flow.exchange_code(ctx.runtime.http, config.subscription_token_url, code,
                                               verifier, config.subscription_timeout)
    except flow.LoginError as exc:
        await ctx.db.write(logins_q.fail, login_id, str(exc), ctx.now_ms(), True)
        return
    except Exception as exc:  # noqa: BLE001 - whatever it was, the user reads one sentence
        log.error("subscription sign-in failed unexpectedly (%s)", type(exc).__name__)
        await ctx.db.write(logins_q.fail, login_id, "The sign-in failed on the server.", ctx.now_ms(), True)
        return
    name = secret_name(login["provider_type"])
    sealed = ctx.secrets.seal(json.dumps(credentials).encode(), secrets_q.secret_aad(account_id, name))
    now = ctx.now_ms()

    def job(conn):
        # Canceled, replaced or expired while the exchange ran: the tokens are not kept.
        if not logins_q.complete(conn, login_id, name, now):
            return False
        secrets_q.set_secret(conn, account_id, name, sealed, {"provider": login["provider_type"],
                                                              "kind": "provider-oauth"}, now, new_id())
        return True
    if await ctx.db.write(job):
        ctx.broadcaster.notify_account(account_id, "model-provider-changed")


def _ended(login: dict) -> str:
    return "completed" if login["status"] == "completed" else f"failed: {login['error']}"


async def get_provider_oauth_status(ctx: HandlerContext, env, action) -> dict:
    login = await _get(ctx, env.account_id, action.login_id)
    value = {"_": "ProviderOAuthStatusResponse", "loginId": login["id"], "status": login["status"]}
    if login["secret_name"]:
        value["secretName"] = login["secret_name"]
    if login["error"]:
        value["error"] = login["error"]
    return value


async def cancel_provider_oauth(ctx: HandlerContext, env, action) -> dict:
    login = await _get(ctx, env.account_id, action.login_id)
    await ctx.db.write(logins_q.fail, login["id"], "Sign-in canceled.", ctx.now_ms())
    return {"_": "CancelProviderOAuthResponse", "loginId": login["id"]}

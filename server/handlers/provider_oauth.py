"""Subscription sign-in: StartProviderOAuth, SubmitProviderOAuthCode, GetProviderOAuthStatus and
CancelProviderOAuth, behind the operator's `--subscription-auth` (off by default, as the reference).

The state machine is the reference's (`agents/src/provider-oauth.ts`): a login is `pending` until
its code is traded for tokens (`completed`, naming the secret the provider references as
`secretRefs.oauth`) or it fails, is canceled, replaced by a newer login of the same account and
provider type, or outlives `--subscription-login-timeout` (`failed`, with one sentence). Logins
belong to the account that started them: another account's loginId is "not found". The verifier
and state live only in this server's memory, like the reference's; finished logins stay readable
for as long again so a polling client sees how they ended.

Unlike the reference, SubmitProviderOAuthCode answers once the exchange is over: success, or the
one sentence the status also shows. The credentials are sealed like every secret (`SetSecret`'s
box and row binding) under `<type>-subscription-oauth`; a token is never in an answer or a log.
"""
from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass, field

from seed_agents.protocol.api.actions_oauth import OAUTH_PROVIDER_TYPES, parse_authorization_input
from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..clock import new_id
from ..providers import subscription_login as flow
from ..store import secrets_table as secrets_q
from .context import HandlerContext

log = logging.getLogger("seed_agents.providers.subscription")

# Logins one account may have in memory (pending or finished and not yet swept): one pending per
# provider type, the rest finished; the oldest finished ones go first.
MAX_LOGINS_PER_ACCOUNT = 8
# Logins held in all, over every account: past it a start is refused (503) until some expire.
MAX_LOGINS = 10_000


def secret_name(provider_type: str) -> str:
    """The stable per-account secret a sign-in's credentials land in (the reference's name), so
    signing in again overwrites them in place."""
    return f"{provider_type}-subscription-oauth"


@dataclass
class Login:
    login_id: str
    account_id: str
    provider_type: str
    pkce: flow.Pkce
    expires_at: int
    status: str = "pending"
    secret_name: str | None = None
    error: str | None = None
    finished_at: int | None = None
    exchanging: bool = False   # a code is being traded: a second one waits for no one
    exchange_failed: bool = False
    task: asyncio.Task | None = field(default=None, repr=False)


class Logins:
    """Every login this server holds, by loginId."""

    def __init__(self) -> None:
        self.by_id: dict[str, Login] = {}

    def sweep(self, now: int, ttl_ms: int) -> None:
        for login in list(self.by_id.values()):
            if login.status == "pending" and now >= login.expires_at:
                finish(login, now, error="Sign-in timed out.")
            if login.finished_at is not None and now - login.finished_at > ttl_ms:
                del self.by_id[login.login_id]

    def of_account(self, account_id: str) -> list[Login]:
        return [login for login in self.by_id.values() if login.account_id == account_id]

    def get(self, account_id: str, login_id: str) -> Login:
        login = self.by_id.get(login_id)
        if login is None or login.account_id != account_id:
            raise ProtocolError(404, "Sign-in not found")
        return login


def finish(login: Login, now: int, *, secret: str | None = None, error: str | None = None) -> None:
    if login.status != "pending":
        return
    login.status = "completed" if secret is not None else "failed"
    login.secret_name, login.error, login.finished_at = secret, error, now


def _logins(app) -> Logins:  # noqa: ANN001
    logins = getattr(app, "oauth_logins", None)
    if logins is None:
        logins = app.oauth_logins = Logins()
    return logins


def _ttl_ms(app) -> int:  # noqa: ANN001
    return int(app.config.subscription_login_timeout * 1000)


def _swept(app) -> Logins:  # noqa: ANN001
    logins = _logins(app)
    logins.sweep(app.now_ms(), _ttl_ms(app))
    return logins


async def start_provider_oauth(app: HandlerContext, env, action) -> dict:
    if not app.config.subscription_auth:
        raise ProtocolError(403, "Subscription sign-in is not enabled on this server (--subscription-auth)")
    if action.provider_type not in OAUTH_PROVIDER_TYPES:
        raise ProtocolError(400, f"StartProviderOAuth.providerType: provider type "
                                 f"{quote(action.provider_type)} does not support subscription sign-in "
                                 f"(supported: {', '.join(OAUTH_PROVIDER_TYPES)})")
    now = app.now_ms()
    logins = _swept(app)
    mine = logins.of_account(env.account_id)
    for login in mine:   # one pending login per account and provider type: the newest wins
        if login.provider_type == action.provider_type:
            finish(login, now, error="Replaced by a newer sign-in.")
    finished = sorted((x for x in mine if x.status != "pending"), key=lambda x: x.finished_at or 0)
    for login in finished[:max(0, len(mine) + 1 - MAX_LOGINS_PER_ACCOUNT)]:
        del logins.by_id[login.login_id]
    if len(logins.by_id) >= MAX_LOGINS:
        raise ProtocolError(503, "Too many sign-ins are pending on this server; try again in a few minutes")
    pkce = flow.begin(app.config.subscription_authorize_url)
    login = Login(str(uuid.uuid4()), env.account_id, action.provider_type, pkce, now + _ttl_ms(app))
    logins.by_id[login.login_id] = login
    return {"_": "StartProviderOAuthResponse", "loginId": login.login_id, "authUrl": pkce.url,
            "expiresAt": login.expires_at}


async def submit_provider_oauth_code(app: HandlerContext, env, action) -> dict:
    login = _swept(app).get(env.account_id, action.login_id)
    if login.status != "pending":
        raise ProtocolError(409, f"Sign-in is no longer pending (it {_ended(login)})")
    if login.exchanging:
        raise ProtocolError(409, "A code for this sign-in is already being exchanged")
    code, state = parse_authorization_input(action.code)
    if state is not None and state != login.pkce.state:
        # A redirect from another login (or a forged one): this login cannot be trusted any more.
        finish(login, app.now_ms(), error="State mismatch: the redirect is not from this sign-in.")
        raise ProtocolError(400, "SubmitProviderOAuthCode.code: state mismatch: the redirect is not from this "
                                 "sign-in (start a new one)")
    if not code:
        raise ProtocolError(400, "SubmitProviderOAuthCode.code: no authorization code in it (paste the whole "
                                 "redirect URL, or the code)")
    login.exchanging = True
    # A task of its own: a client that goes away mid-exchange does not cancel it half-way.
    login.task = asyncio.ensure_future(_exchange(app, login, code))
    await asyncio.shield(login.task)
    if login.status == "completed":
        return {"_": "SubmitProviderOAuthCodeResponse"}
    # The token endpoint failed it (502), or a cancel, a newer login or the timeout did (409).
    raise ProtocolError(502 if login.exchange_failed else 409, login.error or "The sign-in failed.")


async def _exchange(app, login: Login, code: str) -> None:  # noqa: ANN001
    config = app.config
    try:
        credentials = await flow.exchange_code(app.runtime.http, config.subscription_token_url, code,
                                               login.pkce.verifier, config.subscription_timeout)
    except flow.LoginError as exc:
        login.exchange_failed = True
        finish(login, app.now_ms(), error=str(exc))
        return
    except Exception as exc:  # noqa: BLE001 - whatever it was, the user reads one sentence
        log.error("subscription sign-in failed unexpectedly (%s)", type(exc).__name__)
        login.exchange_failed = True
        finish(login, app.now_ms(), error="The sign-in failed on the server.")
        return
    finally:
        login.exchanging = False
    if login.status != "pending":   # canceled, replaced or expired while the exchange ran
        return
    name = secret_name(login.provider_type)
    sealed = app.secrets.seal(json.dumps(credentials).encode(), secrets_q.secret_aad(login.account_id, name))
    await app.db.write(secrets_q.set_secret, login.account_id, name, sealed,
                       {"provider": login.provider_type, "kind": "provider-oauth"}, app.now_ms(), new_id())
    finish(login, app.now_ms(), secret=name)
    app.broadcaster.notify_account(login.account_id, "model-provider-changed")


def _ended(login: Login) -> str:
    return "completed" if login.status == "completed" else f"failed: {login.error}"


async def get_provider_oauth_status(app: HandlerContext, env, action) -> dict:
    login = _swept(app).get(env.account_id, action.login_id)
    value = {"_": "ProviderOAuthStatusResponse", "loginId": login.login_id, "status": login.status}
    if login.secret_name:
        value["secretName"] = login.secret_name
    if login.error:
        value["error"] = login.error
    return value


async def cancel_provider_oauth(app: HandlerContext, env, action) -> dict:
    login = _swept(app).get(env.account_id, action.login_id)
    finish(login, app.now_ms(), error="Sign-in canceled.")
    return {"_": "CancelProviderOAuthResponse", "loginId": login.login_id}

"""OpenAI "Sign in with ChatGPT" (the Codex CLI's OAuth client), as the reference does it
(`agents/src/provider-oauth.ts`): PKCE (S256) and a `state`, the authorization URL handed to the
client, and the code (pasted, or caught by the desktop on the user's own localhost:1455) traded
at the token endpoint for credentials in pi-ai's shape {access, refresh, expires, accountId}.

authlib (RFC 6749/7636) makes the verifier, the challenge, the state, the URL and the token
request body; the HTTP exchange is ours so it is bounded in bytes and time and goes through the
provider network policy. Nothing here ever puts a token, a code or a remote body into an
exception message or a log line: `LoginError` carries one fixed sentence.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from dataclasses import dataclass

import httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge

log = logging.getLogger("seed_agents.providers.subscription")

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
AUTHORIZE_URL = "https://auth.openai.com/oauth/authorize"
TOKEN_URL = "https://auth.openai.com/oauth/token"
REDIRECT_URI = "http://localhost:1455/auth/callback"   # the only one the client has registered
SCOPE = "openid profile email offline_access"
JWT_CLAIM_PATH = "https://api.openai.com/auth"
# A token answer is a few KiB of JSON (three JWTs at most); more is not a token answer.
MAX_TOKEN_BODY = 64 * 1024


class LoginError(Exception):
    """One sentence a user may read; never holds a token, a code or the remote body. `refused`:
    the endpoint said no (HTTP 4xx: a spent, revoked or expired grant), rather than failing."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class Pkce:
    verifier: str
    state: str
    url: str


def begin(authorize_url: str = AUTHORIZE_URL) -> Pkce:
    """A fresh verifier and state, and the browser URL carrying the S256 challenge."""
    verifier = generate_token(64)   # 64 of [A-Za-z0-9]: within RFC 7636's 43..128
    state = generate_token(32)
    url = prepare_grant_uri(authorize_url, CLIENT_ID, "code", redirect_uri=REDIRECT_URI, scope=SCOPE,
                            state=state, code_challenge=create_s256_code_challenge(verifier),
                            code_challenge_method="S256", id_token_add_organizations="true",
                            codex_cli_simplified_flow="true", originator="pi")
    return Pkce(verifier, state, url)


def account_id_of(access_token: str) -> str | None:
    """The ChatGPT account id the reference reads from the access token's JWT claim (unverified:
    the token is only ever sent back to its issuer, who checks it)."""
    parts = access_token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    auth = payload.get(JWT_CLAIM_PATH) if type(payload) is dict else None
    value = auth.get("chatgpt_account_id") if type(auth) is dict else None
    return value if type(value) is str and value else None


async def exchange_code(http: httpx.AsyncClient, token_url: str, code: str, verifier: str,
                        timeout: float) -> dict:
    """Credentials {access, refresh, expires (Unix ms), accountId} for an authorization code."""
    body = prepare_token_request("authorization_code", code=code, client_id=CLIENT_ID,
                                 code_verifier=verifier, redirect_uri=REDIRECT_URI)
    return _credentials(await _post_token(http, token_url, body, timeout, "sign-in"), None)


async def refresh(http: httpx.AsyncClient, token_url: str, refresh_token: str, timeout: float) -> dict:
    """New credentials for a refresh token (a rotated refresh token replaces the old one)."""
    body = prepare_token_request("refresh_token", refresh_token=refresh_token, client_id=CLIENT_ID)
    return _credentials(await _post_token(http, token_url, body, timeout, "refresh"), refresh_token)


def _credentials(answer: dict, old_refresh: str | None) -> dict:
    access, refresh_token, expires_in = (answer.get("access_token"), answer.get("refresh_token", old_refresh),
                                         answer.get("expires_in"))
    if type(access) is not str or not access or type(refresh_token) is not str or not refresh_token \
            or type(expires_in) not in (int, float) or not 0 < expires_in < 10 * 365 * 86400:
        raise LoginError("The token endpoint's answer lacks an access token, a refresh token or its lifetime.")
    account = account_id_of(access)
    if account is None:
        raise LoginError("The access token names no ChatGPT account.")
    return {"access": access, "refresh": refresh_token, "expires": int(time.time() * 1000 + expires_in * 1000),
            "accountId": account}


async def _post_token(http: httpx.AsyncClient, url: str, body: str, timeout: float, what: str) -> dict:
    """The token endpoint's JSON answer, read within `timeout` seconds and MAX_TOKEN_BODY bytes."""
    try:
        async with asyncio.timeout(timeout):
            async with http.stream("POST", url, content=body.encode(), headers={
                    "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}) as r:
                data = bytearray()
                async for chunk in r.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_TOKEN_BODY:
                        raise LoginError(f"The token endpoint's answer is larger than {MAX_TOKEN_BODY} bytes.")
                status = r.status_code
    except TimeoutError:
        raise LoginError(f"The token endpoint did not answer within {timeout:g} seconds.") from None
    except httpx.HTTPError as exc:
        log.warning("subscription %s: the token endpoint could not be reached (%s)", what, type(exc).__name__)
        raise LoginError("The token endpoint could not be reached.") from None
    try:
        answer = json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError):
        answer = None
    if status >= 400:
        code = answer.get("error") if type(answer) is dict else None
        # An OAuth error code is a short token (RFC 6749 5.2): said when it is one, nothing else.
        named = f" ({code})" if type(code) is str and code.replace("_", "").isalnum() and len(code) < 40 else ""
        log.info("subscription %s: the token endpoint refused with HTTP %d%s", what, status, named)
        raise LoginError(f"The token endpoint refused the {what} with HTTP {status}{named}.", refused=status < 500)
    if type(answer) is not dict:
        raise LoginError("The token endpoint answered something other than a JSON token.")
    return answer

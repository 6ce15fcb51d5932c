"""Subscription sign-in: Start/SubmitProviderOAuthCode/GetProviderOAuthStatus/CancelProviderOAuth.

Shapes are the Seed protocol's (`agents/protocol/src/index.ts`): a login is named by `loginId`;
the code comes back through the signed `SubmitProviderOAuthCode` as the browser's redirect URL,
a query string, `code#state`, or the bare code (`parse_authorization_input`, the reference's
`parseAuthorizationInput`).
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from .fields import MAX_ID, MAX_NAME, MAX_URL, ActionKind, Fields, read, write

# Provider types that can sign in with a subscription (OpenAI: "Sign in with ChatGPT").
OAUTH_PROVIDER_TYPES = ("openai",)
# A pasted redirect URL carries the code, the state and a few more parameters: a URL's bound.
MAX_CODE_INPUT = MAX_URL


@dataclass(frozen=True)
class StartProviderOAuth:
    ts: int
    provider_type: str


@dataclass(frozen=True)
class SubmitProviderOAuthCode:
    ts: int
    login_id: str
    code: str

    def __repr__(self) -> str:   # the code is a credential until it is spent: never in a log
        return f"SubmitProviderOAuthCode(ts={self.ts}, login_id={self.login_id!r})"


@dataclass(frozen=True)
class GetProviderOAuthStatus:
    ts: int
    login_id: str


@dataclass(frozen=True)
class CancelProviderOAuth:
    ts: int
    login_id: str


def parse_authorization_input(text: str) -> tuple[str | None, str | None]:
    """(code, state) of what a user pasted: a full redirect URL, a query string, `code#state`,
    or a bare code. Either may be None."""
    value = text.strip()
    if not value:
        return None, None
    parts = urlsplit(value)
    if parts.scheme and parts.netloc:
        query = parse_qs(parts.query, keep_blank_values=True)
        return _first(query, "code"), _first(query, "state")
    if "#" in value:
        code, _, state = value.partition("#")
        return code or None, state.split("#", 1)[0] or None
    if "code=" in value:
        query = parse_qs(value.lstrip("?"), keep_blank_values=True)
        return _first(query, "code"), _first(query, "state")
    return value, None


def _first(query: dict, key: str) -> str | None:
    values = query.get(key)
    return values[0] if values and values[0] else None


def _start(f: Fields, ts: int) -> StartProviderOAuth:
    return StartProviderOAuth(ts, f.text("providerType", MAX_NAME))


def _submit(f: Fields, ts: int) -> SubmitProviderOAuthCode:
    return SubmitProviderOAuthCode(ts, f.text("loginId", MAX_ID), f.text("code", MAX_CODE_INPUT))


ACTIONS: dict[str, ActionKind] = {
    "StartProviderOAuth": write(_start),
    "SubmitProviderOAuthCode": write(_submit),
    "GetProviderOAuthStatus": read(lambda f, ts: GetProviderOAuthStatus(ts, f.text("loginId", MAX_ID))),
    "CancelProviderOAuth": write(lambda f, ts: CancelProviderOAuth(ts, f.text("loginId", MAX_ID))),
}

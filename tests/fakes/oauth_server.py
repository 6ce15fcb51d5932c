"""A fake OpenAI authorization server on 127.0.0.1: what "Sign in with ChatGPT" talks to.

`authorize(auth_url)` plays the user's browser: it reads the challenge and state of the URL the
server handed out and returns the redirect URL (with a fresh one-use code) the desktop would
catch. `POST /oauth/token` trades a code (checking the PKCE verifier, the client and the
redirect URI, each code once) or a refresh token (rotated on use) for an access token, a JWT
carrying the ChatGPT account id claim. `mode` makes it misbehave: `garbage`, `huge`, `hang`,
`refuse` (400 invalid_grant for everything).

It is also the ChatGPT backend: `POST /backend-api/codex/responses` checks the bearer (a live
access token) and `chatgpt-account-id`, records the body, and streams the Responses API's events
for the next script in `replies` (text pieces, then function calls), ending `response.completed`.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.fakes.loopback import LoopbackFake, RecordedRequest, pause, send, send_json

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
REDIRECT_URI = "http://localhost:1455/auth/callback"
CHATGPT_ACCOUNT = "acct-fake-1234"


def jwt(claims: dict) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part(claims)}.c2ln"


class FakeOAuth(LoopbackFake):
    def __init__(self, *, expires_in: int = 3600) -> None:
        super().__init__()
        self.expires_in = expires_in
        self.mode = "ok"
        self.codes: dict[str, str] = {}       # code -> S256 challenge it was issued for
        self.used_codes: set[str] = set()
        self.refresh_tokens: set[str] = set()
        self.issued: list[dict] = []          # every token answer, to look for tokens where none may be
        self.token_requests: list[dict] = []
        self.live_access: set[str] = set()
        self.replies: list[dict] = []        # {"text": [pieces], "calls": [(call_id, name, args)]}
        self.turn_requests: list[dict] = []  # {"headers", "body"} of each /codex/responses

    def authorize(self, auth_url: str, *, state: str | None = None) -> str:
        query = {k: v[0] for k, v in parse_qs(urlsplit(auth_url).query).items()}
        assert query["response_type"] == "code" and query["client_id"] == CLIENT_ID
        assert query["code_challenge_method"] == "S256" and query["redirect_uri"] == REDIRECT_URI
        code = "code-" + secrets.token_urlsafe(16)
        self.codes[code] = query["code_challenge"]
        return REDIRECT_URI + "?" + urlencode({"code": code, "state": state or query["state"]})

    def _tokens(self) -> dict:
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.refresh_tokens.add(refresh)
        answer = {"access_token": jwt({"https://api.openai.com/auth": {"chatgpt_account_id": CHATGPT_ACCOUNT},
                                       "n": secrets.token_hex(8)}),
                  "refresh_token": refresh, "expires_in": self.expires_in, "token_type": "Bearer"}
        self.issued.append(answer)
        self.live_access.add(answer["access_token"])
        return answer

    def revoke(self) -> None:
        self.refresh_tokens.clear()
        self.live_access.clear()

    async def _codex(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        self.turn_requests.append({"headers": request.headers, "body": request.body})
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if bearer not in self.live_access or request.headers.get("chatgpt-account-id") != CHATGPT_ACCOUNT:
            return await send_json(writer, 401, {"error": {"message": "bad token", "code": "token_expired"}})
        script = self.replies.pop(0) if self.replies else {"text": ["ok"]}
        events = [{"type": "response.created", "response": {"id": "resp_1"}}]
        events += [{"type": "response.output_text.delta", "delta": piece} for piece in script.get("text", [])]
        for call_id, name, args in script.get("calls", []):
            item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": args}
            events += [{"type": "response.output_item.added", "item": {**item, "arguments": ""}},
                       {"type": "response.function_call_arguments.delta", "delta": args},
                       {"type": "response.output_item.done", "item": item}]
        events.append({"type": "response.completed", "response": {"id": "resp_1", "usage": {
            "input_tokens": 12, "output_tokens": 5, "total_tokens": 17, "input_tokens_details": {"cached_tokens": 2}}}})
        body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        return await send(writer, 200, "text/event-stream", body)

    async def _respond(self, request: RecordedRequest, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> bool:
        if request.method == "POST" and request.path == "/backend-api/codex/responses":
            return await self._codex(request, writer)
        if request.method != "POST" or request.path != "/oauth/token":
            return await send_json(writer, 404, {"error": "not_found"})
        form = {k: v[0] for k, v in parse_qs(request.raw_body.decode()).items()}
        self.token_requests.append(form)
        if self.mode == "hang":
            await pause(reader, None)
            return False
        if self.mode == "garbage":
            return await send(writer, 200, "text/html", b"<html>\x00\xff not a token</html>")
        if self.mode == "huge":
            return await send(writer, 200, "application/json", b'{"access_token": "' + b"a" * (1 << 20) + b'"}')
        if self.mode == "refuse" or form.get("client_id") != CLIENT_ID:
            return await send_json(writer, 400, {"error": "invalid_grant", "error_description": "no"})
        if form.get("grant_type") == "authorization_code":
            code = form.get("code", "")
            challenge = self.codes.get(code)
            verifier = form.get("code_verifier", "")
            s256 = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if challenge is None or code in self.used_codes or s256 != challenge \
                    or form.get("redirect_uri") != REDIRECT_URI:
                return await send_json(writer, 400, {"error": "invalid_grant"})
            self.used_codes.add(code)
            return await send_json(writer, 200, self._tokens())
        if form.get("grant_type") == "refresh_token":
            token = form.get("refresh_token", "")
            if token not in self.refresh_tokens:
                return await send_json(writer, 401, {"error": "invalid_grant"})
            self.refresh_tokens.discard(token)
            return await send_json(writer, 200, self._tokens())
        return await send_json(writer, 400, {"error": "unsupported_grant_type"})

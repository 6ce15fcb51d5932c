"""A subscription provider's access token, refreshed before it expires, once across a cluster.

The credentials are the sealed secret a sign-in stored (`{access, refresh, expires, accountId}`,
server/handlers/provider_oauth.py). Before each model step `access()` opens them; when the token
has less than `REFRESH_MARGIN_MS` left, one server refreshes it:

- it claims the refresh with a lease in the secret row's metadata (`refreshing: {by, until}`),
  written by a compare-and-swap on the row's `updated_at` and metadata: on PostgreSQL two servers'
  UPDATEs of one row serialize and the second finds the row changed, so exactly one claims;
- the others (and other turns of this server) wait for the row to change, then use the new token;
- the winner trades the refresh token (rotated by the endpoint) and stores the new credentials
  sealed, clearing the lease. A lease whose server died runs out after `--subscription-timeout`
  and the next turn claims again.

A refresh the endpoint refuses (HTTP 4xx: revoked, expired) marks the secret `needsReauth` with
one sentence (an endpoint that fails, hangs or answers garbage only fails that turn, the lease
given back); ListModelProviders then says `authStatus: 'needs-login'` and `authError`, and the turn
fails with the reference's sentence. A new sign-in overwrites the secret and clears it all.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os

import httpx

from ..providers import subscription_login as flow
from ..providers.base import ProviderError
from ..database.port import Storage
from ..store import secrets_table as secrets_q
from ..store.secrets import SecretBox, SecretOpenError

log = logging.getLogger("seed_agents.providers.subscription")

REFRESH_MARGIN_MS = 5 * 60 * 1000   # refreshed when less than this is left
POLL_SECONDS = 0.05                 # how often a waiting turn looks at the row again
EXPIRED = ("Your OpenAI subscription sign-in has expired or was revoked. Open model provider settings "
           "and sign in with ChatGPT again.")


class SubscriptionTokens:
    def __init__(self, db: Storage, box: SecretBox, http: httpx.AsyncClient, config, now_ms) -> None:  # noqa: ANN001
        self.db, self.box, self.http, self.config, self.now_ms = db, box, http, config, now_ms
        self.me = os.urandom(8).hex()   # this process, as a lease holder
        self.refreshes = 0              # refreshes this server made (tests, metrics)

    async def access(self, account_id: str, name: str) -> tuple[str, str]:
        """(access token, ChatGPT account id) good for a few minutes more; ProviderError when the
        sign-in is gone, expired beyond refresh, or the refresh failed."""
        timeout = self.config.subscription_timeout
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 3 * timeout + 5
        while loop.time() < give_up:
            row = await self.db.aread(secrets_q.token_row, account_id, name)
            if row is None:
                raise ProviderError(f"provider openai: no subscription sign-in is stored (secret {name!r}); "
                                    "sign in with ChatGPT first")
            sealed, meta, updated = row
            creds = self._open(sealed, account_id, name)
            now = self.now_ms()
            if creds["expires"] - now > REFRESH_MARGIN_MS and not meta.get("needsReauth"):
                return creds["access"], creds["accountId"]
            if meta.get("needsReauth"):
                raise ProviderError(EXPIRED)
            lease = meta.get("refreshing")
            if isinstance(lease, dict) and lease.get("until", 0) > now:
                await asyncio.sleep(POLL_SECONDS)   # another turn or server is refreshing
                continue
            claim = {**meta, "refreshing": {"by": self.me, "until": now + int(timeout * 1000) + 5000}}
            if not await self.db.write(secrets_q.swap_token_metadata, account_id, name, updated, meta, claim, now):
                continue   # someone changed the row first: look again
            return await self._refresh(account_id, name, creds, claim)
        raise ProviderError("provider openai: the subscription token could not be refreshed in time")

    def _open(self, sealed: bytes, account_id: str, name: str) -> dict:
        try:
            creds = json.loads(self.box.open(bytes(sealed), secrets_q.secret_aad(account_id, name)))
        except (SecretOpenError, ValueError):
            raise ProviderError("provider openai: the stored subscription sign-in cannot be read (it was stored "
                                "under another secrets key); sign in with ChatGPT again") from None
        if not isinstance(creds, dict) or not all(isinstance(creds.get(k), str) for k in ("access", "refresh",
                                                                                          "accountId")) \
                or not isinstance(creds.get("expires"), int):
            raise ProviderError("provider openai: the stored subscription sign-in is damaged; sign in with "
                                "ChatGPT again")
        return creds

    async def _refresh(self, account_id: str, name: str, creds: dict, claim: dict) -> tuple[str, str]:
        meta = {k: v for k, v in claim.items() if k not in ("refreshing", "needsReauth", "reauthReason")}
        try:
            fresh = await flow.refresh(self.http, self.config.subscription_token_url, creds["refresh"],
                                       self.config.subscription_timeout)
        except flow.LoginError as exc:
            reason = str(exc)
            log.warning("subscription refresh for an account failed: %s", reason)
            if not exc.refused:   # the endpoint failed (down, slow, garbage): the sign-in may still be good
                await self.db.write(secrets_q.mark_token, account_id, name, meta, self.now_ms())
                raise ProviderError(f"provider openai: the subscription token could not be refreshed ({reason}); "
                                    "the next turn tries again") from None
            await self.db.write(secrets_q.mark_token, account_id, name, {**meta, "needsReauth": True, "reauthReason": reason},
                                self.now_ms())
            raise ProviderError(f"{EXPIRED} ({reason})") from None
        except BaseException:
            await self.db.write(secrets_q.mark_token, account_id, name, meta, self.now_ms())   # give the lease back
            raise
        self.refreshes += 1
        sealed = self.box.seal(json.dumps(fresh).encode(), secrets_q.secret_aad(account_id, name))
        await self.db.write(secrets_q.store_token, account_id, name, sealed, meta, self.now_ms())
        return fresh["access"], fresh["accountId"]

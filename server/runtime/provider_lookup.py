"""The provider an account means by a name: its stored config, its key opened, built with the
operator's settings on the runtime's guarded HTTP client. Shared by the runtime (each turn) and
ListProviderModels (through `app.runtime.providers`), so both read a provider the same way.
"""

from __future__ import annotations

from typing import Any

import httpx

from seed_agents.protocol.wire.errors import quote
from seed_agents.protocol.agent.providers import BUILTIN_TYPES

from ..providers.codex import CodexProvider
from ..providers.base import Provider, ProviderError, ProviderNotFound, ProviderSpec
from ..providers.registry import ProviderSettings, make_provider
from ..database.port import Storage
from ..store import providers as providers_q
from ..store import secrets_table as secrets_q
from ..store.secrets import SecretBox, SecretOpenError
from .subscription_tokens import SubscriptionTokens

_UNREAD = object()   # `spec`'s row, not read yet

class ProviderLookup:
    def __init__(self, db: Storage, box: SecretBox, http: httpx.AsyncClient,
                 settings: ProviderSettings) -> None:
        self.db = db
        self.box = box
        self.http = http
        self.settings = settings
        # authMode 'subscription' providers (server/runtime/subscription_tokens.py), when the
        # operator offers subscription sign-in (--subscription-auth).
        self.subscription: SubscriptionTokens | None = None
        self.subscription_base_url = ""

    def spec(self, account_id: str, name: str, row: Any = _UNREAD) -> ProviderSpec:
        """The spec of provider `name` of `account_id` (the built-in `echo` when none is stored
        under that name); ProviderNotFound when there is none, ProviderError when its key is gone.
        `row`: its row when the caller has just read it (`provider`), so it is not read twice."""
        if row is _UNREAD:
            row = self.db.read(providers_q.get_provider, account_id, name)
        if row is None:
            if name not in BUILTIN_TYPES:
                raise ProviderNotFound(f"model provider {quote(name)} is not configured for this account")
            return ProviderSpec(type=name)
        config = row["config"]
        api_key = None
        secret_name = (config.get("secretRefs") or {}).get("apiKey")
        if secret_name:
            try:
                raw = self.db.read(secrets_q.read_secret, self.box, account_id, secret_name)
            except SecretOpenError:
                # Sealed under another secrets key (the server was started with
                # --accept-new-secrets-key, or the row was tampered with): only storing it again helps.
                raise ProviderError(f"the API key of provider {quote(name)} cannot be opened with this "
                                    f"server's secrets key (it was stored under another one): set it "
                                    f"again with `seed-agents providers set {name} ...`") from None
            if raw is None:
                raise ProviderError(f"secret {quote(secret_name)} named by provider {quote(name)} is not set")
            api_key = raw.decode("utf-8", "replace").strip()
        return ProviderSpec(type=config["type"], base_url=config.get("baseUrl"), api_key=api_key,
                            model_defaults=dict(config.get("modelDefaults") or {}))

    def provider(self, account_id: str, name: str) -> Provider:
        """The ready provider `name` of `account_id`."""
        row = self.db.read(providers_q.get_provider, account_id, name)
        if row is not None and row["config"].get("authMode") == "subscription":
            return self._subscription(account_id, name, row["config"])
        return make_provider(self.spec(account_id, name, row), self.http, self.settings)

    def _subscription(self, account_id: str, name: str, config: dict) -> Provider:
        """The ChatGPT backend under the account's sign-in (server/providers/codex.py)."""
        if self.subscription is None:
            raise ProviderError(f"provider {quote(name)} signs in with a ChatGPT subscription, which this "
                                "server does not offer (its operator can turn it on with --subscription-auth)")
        if config.get("type") != "openai":
            raise ProviderError(f"provider {quote(name)}: only openai providers sign in with a subscription")
        secret = (config.get("secretRefs") or {}).get("oauth")
        if not isinstance(secret, str) or not secret:
            raise ProviderError(f"provider {quote(name)} has no subscription sign-in (secretRefs.oauth): sign "
                                "in with ChatGPT first")
        tokens = self.subscription
        spec = ProviderSpec(type="openai", base_url=self.subscription_base_url,
                            model_defaults=dict(config.get("modelDefaults") or {}))
        return CodexProvider(spec, self.http, lambda: tokens.access(account_id, secret),
                             first_token_timeout=self.settings.first_token_timeout,
                             idle_timeout=self.settings.idle_timeout, limits=self.settings.limits)

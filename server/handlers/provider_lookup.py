"""The provider an account means by a name: its stored config, its key opened, built with the
operator's settings. Shared by the runtime (each turn) and ListProviderModels, so both read a
provider the same way. (Here rather than in server/providers/, which knows nothing of the app.)
"""

from __future__ import annotations

from protocol.errors import quote
from server.handlers.secrets import read_secret
from server.store import providers as providers_q

from server.providers.base import Provider, ProviderError, ProviderNotFound, ProviderSpec
from server.providers.registry import ProviderSettings, make_provider


def spec_for(app, account_id: str, name: str) -> ProviderSpec:  # noqa: ANN001
    """The spec of provider `name` of `account_id` (the built-in `echo` when none is stored
    under that name); ProviderNotFound when there is none, ProviderError when its key is gone."""
    row = app.db.read(providers_q.get_provider, account_id, name)
    if row is None:
        if name != "echo":
            raise ProviderNotFound(f"model provider {quote(name)} is not configured for this account")
        return ProviderSpec(type="echo")
    config = row["config"]
    api_key = None
    secret_name = (config.get("secretRefs") or {}).get("apiKey")
    if secret_name:
        raw = read_secret(app, account_id, secret_name)
        if raw is None:
            raise ProviderError(f"secret {quote(secret_name)} named by provider {quote(name)} is not set")
        api_key = raw.decode("utf-8", "replace").strip()
    return ProviderSpec(type=config["type"], base_url=config.get("baseUrl"), api_key=api_key,
                        model_defaults=dict(config.get("modelDefaults") or {}))


def provider_for(app, account_id: str, name: str) -> Provider:  # noqa: ANN001
    """The ready provider `name` of `account_id`, on the runtime's guarded HTTP client."""
    return make_provider(spec_for(app, account_id, name), app.runtime.http,
                         ProviderSettings.from_config(app.config))

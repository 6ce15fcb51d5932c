"""Which provider types exist, what each needs, and how a spec becomes a provider.

The types are the protocol's provider table (`protocol/agent/providers.py`), kept once; this module
says which class speaks each family. The hosted types
talk to their public endpoint: a `baseUrl` stored with one of them is ignored unless the operator
allows overrides (`--allow-provider-base-url`), so a stored API key never goes to a host an
account chose (CONTRACT section 4). `ollama` and `custom` take `baseUrl`;
where any URL may connect is the network policy's business (network.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from seed_agents.protocol.agent import providers as table

from .anthropic import AnthropicProvider
from .base import Provider, ProviderError, ProviderSpec
from .echo import EchoProvider
from .google import GoogleProvider
from .http_stream import StreamLimits
from .openai_compat import OpenAICompatProvider
from .redact import display_url

# The class that speaks each family of the table. A table family with no class here is refused
# at import (and by tests/protocol/test_provider_table.py).
FAMILIES: dict[str, type] = {"builtin": EchoProvider, "openai": OpenAICompatProvider,
                             "anthropic": AnthropicProvider, "google": GoogleProvider}
assert set(FAMILIES) == table.FAMILIES, "the provider table and the registry disagree on families"

DEFAULT_BASE_URLS: dict[str, str] = table.DEFAULT_BASE_URLS
# Hosted services: a public endpoint and a key. A missing key is caught when the provider is
# built rather than by a 401 on the first message. Ollama and custom servers may run without one.
HOSTED_TYPES: frozenset[str] = table.HOSTED_TYPES
KEY_REQUIRED = table.KEY_REQUIRED
OPENAI_COMPAT_TYPES: frozenset[str] = frozenset(t.name for t in table.TABLE if t.family == "openai")
SUPPORTED_TYPES: frozenset[str] = table.PROVIDER_TYPES


@dataclass(frozen=True)
class ProviderSettings:
    """The operator's provider settings (seed_agents.server.config.Config) that shape every provider."""

    first_token_timeout: float = 60.0
    idle_timeout: float = 60.0
    allow_base_url: bool = False   # hosted types may use a stored baseUrl
    limits: StreamLimits = StreamLimits()   # what one model step may send

    @classmethod
    def from_config(cls, config) -> ProviderSettings:  # noqa: ANN001
        return cls(
            first_token_timeout=config.provider_first_token_timeout,
            idle_timeout=config.provider_idle_timeout,
            allow_base_url=config.allow_provider_base_url,
            limits=StreamLimits(event_chars=config.max_model_event_chars, step_chars=config.max_step_output_chars,
                                calls=config.max_tool_calls_per_step),
        )


def resolved_base_url(spec: ProviderSpec, settings: ProviderSettings = ProviderSettings()) -> str | None:
    """The URL a spec talks to: the public one for hosted types (unless overrides are allowed),
    else its own base_url, else the type's default."""
    if spec.type in HOSTED_TYPES and not settings.allow_base_url:
        return DEFAULT_BASE_URLS[spec.type]
    return spec.base_url or DEFAULT_BASE_URLS.get(spec.type)


def check_spec(spec: ProviderSpec, settings: ProviderSettings = ProviderSettings()) -> None:
    """Raise ProviderError if `spec` cannot work."""
    if spec.type not in SUPPORTED_TYPES:
        supported = ", ".join(sorted(SUPPORTED_TYPES))
        raise ProviderError(
            f"provider type {spec.type!r} is not supported (supported: {supported})"
        )
    if spec.type in table.BUILTIN_TYPES:
        return
    if spec.type in KEY_REQUIRED and not (spec.api_key and spec.api_key.strip()):
        raise ProviderError(f"provider {spec.type} needs an API key (secretRefs.apiKey)")
    if spec.api_key and not _header_safe(spec.api_key.strip()):
        raise ProviderError(f"provider {spec.type}: the API key has characters an HTTP header "
                            "cannot carry (only printable ASCII)")
    base_url = resolved_base_url(spec, settings)
    if base_url is None:
        raise ProviderError(f"provider {spec.type} needs a base URL (baseUrl)")
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise ProviderError(f"provider {spec.type} base URL is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ProviderError(
            f"provider {spec.type} base URL must be an http:// or https:// URL with a host, "
            f"got {display_url(base_url)!r}",
            secret=spec.api_key,
        )


def _header_safe(value: str) -> bool:
    return all(" " <= ch <= "~" for ch in value)


def make_provider(
    spec: ProviderSpec,
    client: httpx.AsyncClient,
    settings: ProviderSettings = ProviderSettings(),
) -> Provider:
    """Build the provider for `spec`, sharing `client` (its connection pool) across calls."""
    check_spec(spec, settings)
    cls = FAMILIES[table.family_of(spec.type)]
    if spec.type in table.BUILTIN_TYPES:
        return cls()
    # A key pasted with a trailing newline would make an invalid header; trim it.
    key = spec.api_key.strip() if spec.api_key else None
    resolved = ProviderSpec(
        type=spec.type,
        base_url=resolved_base_url(spec, settings),
        api_key=key or None,
        model_defaults=spec.model_defaults,
    )
    return cls(resolved, client, first_token_timeout=settings.first_token_timeout,
               idle_timeout=settings.idle_timeout, limits=settings.limits)

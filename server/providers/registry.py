"""Which provider types exist, what each needs, and how a spec becomes a provider.

The OpenAI-compatible types are those the Seed desktop offers (CONTRACT section 4); they differ
only in the default base URL and whether an API key is required. `anthropic` and `google` are
not supported yet and are refused like any unknown type.
"""

from __future__ import annotations

import httpx

from .base import Provider, ProviderError, ProviderSpec
from .echo import EchoProvider
from .openai_compat import OpenAICompatProvider

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "groq": "https://api.groq.com/openai/v1",
    "xai": "https://api.x.ai/v1",
    "ollama": "http://localhost:11434/v1",
}

# Hosted services reject anonymous calls, so a missing key is caught when the provider is
# configured rather than on the first message. Ollama and custom servers may run without one.
KEY_REQUIRED: frozenset[str] = frozenset({"openai", "openrouter", "deepseek", "groq", "xai"})

OPENAI_COMPAT_TYPES: frozenset[str] = frozenset({*DEFAULT_BASE_URLS, "custom"})
SUPPORTED_TYPES: frozenset[str] = frozenset({"echo", *OPENAI_COMPAT_TYPES})


def check_spec(spec: ProviderSpec) -> None:
    """Raise ProviderError if `spec` cannot work; usable when a provider is configured."""
    if spec.type not in SUPPORTED_TYPES:
        supported = ", ".join(sorted(SUPPORTED_TYPES))
        raise ProviderError(
            f"provider type {spec.type!r} is not supported (supported: {supported})"
        )
    if spec.type == "echo":
        return
    if spec.type in KEY_REQUIRED and not (spec.api_key and spec.api_key.strip()):
        raise ProviderError(f"provider {spec.type} needs an API key (secretRefs.apiKey)")
    base_url = resolved_base_url(spec)
    if base_url is None:
        raise ProviderError(f"provider {spec.type} needs a base URL (baseUrl)")
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ProviderError(
            f"provider {spec.type} base URL is not a valid URL: {exc}", secret=spec.api_key
        ) from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ProviderError(
            f"provider {spec.type} base URL must be an http:// or https:// URL with a host, "
            f"got {base_url!r}",
            secret=spec.api_key,
        )


def resolved_base_url(spec: ProviderSpec) -> str | None:
    """The URL a spec talks to: its own base_url, else the type's default."""
    return spec.base_url or DEFAULT_BASE_URLS.get(spec.type)


def make_provider(
    spec: ProviderSpec,
    client: httpx.AsyncClient,
    *,
    first_token_timeout: float = 60.0,
    idle_timeout: float = 60.0,
) -> Provider:
    """Build the provider for `spec`, sharing `client` (its connection pool) across calls."""
    check_spec(spec)
    if spec.type == "echo":
        return EchoProvider()
    # A key pasted with a trailing newline would make an invalid header; trim it.
    key = spec.api_key.strip() if spec.api_key else None
    return OpenAICompatProvider(
        ProviderSpec(
            type=spec.type,
            base_url=resolved_base_url(spec),
            api_key=key or None,
            model_defaults=spec.model_defaults,
        ),
        client,
        first_token_timeout=first_token_timeout,
        idle_timeout=idle_timeout,
    )

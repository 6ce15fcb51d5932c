"""Provider types, their defaults and requirements (no traffic: building a provider is offline)."""

import httpx
import pytest

from seed_agents.protocol.api.actions import PROVIDER_TYPES
from seed_agents.server.providers.anthropic import AnthropicProvider
from seed_agents.server.providers.base import ProviderError, ProviderSpec, Usage
from seed_agents.server.providers.echo import EchoProvider
from seed_agents.server.providers.google import GoogleProvider
from seed_agents.server.providers.openai_compat import OpenAICompatProvider
from seed_agents.server.providers.registry import (
    DEFAULT_BASE_URLS,
    HOSTED_TYPES,
    KEY_REQUIRED,
    SUPPORTED_TYPES,
    ProviderSettings,
    check_spec,
    make_provider,
)

OVERRIDES = ProviderSettings(allow_base_url=True)

KEY = "sk-registry-SEKRIT-91b2"


@pytest.fixture
async def client():
    async with httpx.AsyncClient(trust_env=False) as c:
        yield c


def test_default_base_urls():
    assert DEFAULT_BASE_URLS == {
        "openai": "https://api.openai.com/v1",
        "openrouter": "https://openrouter.ai/api/v1",
        "deepseek": "https://api.deepseek.com/v1",
        "groq": "https://api.groq.com/openai/v1",
        "xai": "https://api.x.ai/v1",
        "anthropic": "https://api.anthropic.com",
        "google": "https://generativelanguage.googleapis.com",
        "ollama": "http://localhost:11434/v1",
    }
    assert KEY_REQUIRED == HOSTED_TYPES == {
        "openai", "openrouter", "deepseek", "groq", "xai", "anthropic", "google"}
    # One list of types: the protocol's.
    assert SUPPORTED_TYPES == {"echo", "custom", *DEFAULT_BASE_URLS} == PROVIDER_TYPES


async def test_echo_needs_nothing(client):
    assert isinstance(make_provider(ProviderSpec("echo"), client), EchoProvider)


@pytest.mark.parametrize("type_", sorted(KEY_REQUIRED))
@pytest.mark.parametrize("key", [None, "", "   "])
async def test_hosted_types_need_a_key(client, type_, key):
    with pytest.raises(ProviderError, match="needs an API key"):
        make_provider(ProviderSpec(type_, api_key=key), client)


OPENAI_STYLE = sorted(set(DEFAULT_BASE_URLS) - {"anthropic", "google"})


@pytest.mark.parametrize("type_", OPENAI_STYLE)
async def test_default_base_url_is_used(client, type_):
    p = make_provider(ProviderSpec(type_, api_key=KEY), client)
    assert isinstance(p, OpenAICompatProvider)
    assert p.name == type_
    assert p.url == DEFAULT_BASE_URLS[type_] + "/chat/completions"


@pytest.mark.parametrize("type_", sorted(HOSTED_TYPES))
async def test_hosted_types_ignore_a_stored_base_url_unless_the_operator_allows_it(client, type_):
    # Issue 12 finding 4: the stored key must not follow a URL the account chose.
    spec = ProviderSpec(type_, base_url="http://127.0.0.1:9/x", api_key=KEY)
    assert make_provider(spec, client).base_url == DEFAULT_BASE_URLS[type_].rstrip("/")
    assert make_provider(spec, client, OVERRIDES).base_url == "http://127.0.0.1:9/x"


@pytest.mark.parametrize("type_", ["ollama", "custom"])
async def test_ollama_and_custom_take_their_base_url(client, type_):
    p = make_provider(ProviderSpec(type_, base_url="http://127.0.0.1:9/x"), client)
    assert p.url == "http://127.0.0.1:9/x/chat/completions"


async def test_native_types(client):
    p = make_provider(ProviderSpec("anthropic", api_key=KEY), client)
    assert isinstance(p, AnthropicProvider) and p.url == "https://api.anthropic.com/v1/messages"
    p = make_provider(ProviderSpec("google", api_key=KEY), client)
    assert isinstance(p, GoogleProvider)
    assert p.url_for("models/gemini-x") == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-x"
        ":streamGenerateContent?alt=sse")


async def test_ollama_key_is_optional(client):
    make_provider(ProviderSpec("ollama"), client)


async def test_custom_needs_a_base_url_but_no_key(client):
    with pytest.raises(ProviderError, match="needs a base URL"):
        make_provider(ProviderSpec("custom", api_key=KEY), client)
    p = make_provider(ProviderSpec("custom", base_url="http://127.0.0.1:8000/v1"), client)
    assert p.name == "custom"


@pytest.mark.parametrize("type_", ["bedrock", "", "OpenAI"])
async def test_unsupported_types_are_refused(client, type_):
    with pytest.raises(ProviderError, match="not supported"):
        make_provider(ProviderSpec(type_, api_key=KEY), client)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "127.0.0.1:8000/v1", f"http:///{KEY}"])
def test_base_url_must_be_http_with_a_host(url):
    with pytest.raises(ProviderError, match="base URL") as info:
        check_spec(ProviderSpec("custom", base_url=url, api_key=KEY))
    assert KEY not in info.value.message


def test_spec_repr_hides_the_key():
    assert KEY not in repr(ProviderSpec("openai", api_key=KEY))
    assert KEY not in repr(ProviderSpec("custom", base_url=f"http://u:{KEY}@h/v1?key={KEY}"))


def test_usage_wire_shape():
    assert Usage(input=1, output=2, cache_read=3, cache_write=4, total=3).to_wire() == {
        "input": 1,
        "output": 2,
        "cacheRead": 3,
        "cacheWrite": 4,
        "total": 3,
    }


def test_provider_error_scrubs_the_secret():
    err = ProviderError(f"bad header Bearer {KEY} (again: {KEY})", secret=KEY)
    assert KEY not in err.message and KEY not in str(err) and KEY not in repr(err)
    assert err.message == "bad header Bearer [redacted] (again: [redacted])"


@pytest.mark.parametrize("key", ["sk-ключ", "sk-a\nb", "sk-\x00"])
async def test_keys_a_header_cannot_carry_are_refused_clearly(client, key):
    with pytest.raises(ProviderError, match="printable ASCII") as info:
        make_provider(ProviderSpec("anthropic", api_key=key), client)
    assert key not in info.value.message

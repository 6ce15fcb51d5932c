"""The native Anthropic provider against a real fake Messages API on 127.0.0.1."""

import time

import httpx
import pytest

from seed_agents.server.providers.anthropic import API_VERSION, AnthropicProvider
from seed_agents.server.providers.base import ChatMessage, ModelInfo, ProviderError, ProviderSpec, TextDelta, Usage

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.sse_base import Script

KEY = "sk-ant-test-SEKRIT-0b7d1e"
MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Say hi"),
            ChatMessage("assistant", "hi"), ChatMessage("user", "again"),
            ChatMessage("user", "please")]


@pytest.fixture
async def client():
    async with httpx.AsyncClient(trust_env=False) as c:
        yield c


@pytest.fixture
async def fake():
    async with FakeAnthropic(key=KEY) as f:
        yield f


def provider(fake, client, *, key=KEY, defaults=None, **timeouts):
    timeouts = {"first_token_timeout": 5.0, "idle_timeout": 5.0, **timeouts}
    spec = ProviderSpec("anthropic", base_url=fake.base_url, api_key=key,
                        model_defaults=defaults or {})
    return AnthropicProvider(spec, client, **timeouts)


async def collect(p, messages=MESSAGES):
    return [item async for item in p.stream("claude-test", messages)]


async def failure(p) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(p)
    assert KEY not in info.value.message
    return info.value


async def test_streams_text_deltas_then_usage_with_cache_counts(fake, client):
    fake.default = Script(chunks=["Hel", "lo", ", world"])
    items = await collect(provider(fake, client))
    assert items == [TextDelta("Hel"), TextDelta("lo"), TextDelta(", world"),
                     Usage(input=11, output=5, cache_read=7, cache_write=3, total=26)]


async def test_request_follows_the_messages_api(fake, client):
    await collect(provider(fake, client, defaults={"temperature": 0.5, "stream": False}))
    [req] = fake.requests
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == API_VERSION
    assert "authorization" not in req.headers
    assert req.body == {
        "model": "claude-test", "max_tokens": 4096, "temperature": 0.5, "stream": True,
        "system": "Be brief.",
        # consecutive user turns are joined: the API wants alternating roles
        "messages": [{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"},
                     {"role": "user", "content": "again\n\nplease"}],
    }


async def test_mid_stream_error_event_is_a_fixed_phrase(fake, client, caplog):
    fake.default = Script(chunks=["a", "b", "c"], error_after=2,
                          error_message=f"internal detail with {KEY}")
    got = []
    with pytest.raises(ProviderError) as info:
        async for item in provider(fake, client).stream("m", MESSAGES):
            got.append(item)
    assert got == [TextDelta("a"), TextDelta("b")]
    assert info.value.message.endswith("HTTP 529 (the provider is overloaded)")
    assert "internal detail" not in info.value.message
    assert "internal detail" in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize("status, phrase", [
    (429, "HTTP 429 (rate limited by the provider)"),
    (529, "HTTP 529 (the provider is overloaded)"),
    (500, "HTTP 500 (the provider failed)"),
])
async def test_http_errors_carry_status_and_phrase(fake, client, status, phrase):
    fake.default = Script(status=status, error_message="remote words")
    err = await failure(provider(fake, client))
    assert err.status == status and err.message.endswith(phrase)
    assert "remote words" not in err.message


async def test_wrong_key_is_401(fake, client):
    err = await failure(provider(fake, client, key="sk-ant-wrong"))
    assert err.message.endswith("HTTP 401 (the provider refused the API key)")


async def test_first_token_stall_times_out(fake, client):
    fake.default = Script(first_delay=30)
    started = time.monotonic()
    err = await failure(provider(fake, client, first_token_timeout=0.3))
    assert "no first token within 0.3 s" in err.message
    assert time.monotonic() - started < 3
    await fake.wait_for_disconnect()   # the request was abandoned, not left running


async def test_idle_stall_times_out(fake, client):
    fake.default = Script(chunks=["a", "b"], chunk_delay=30)
    err = await failure(provider(fake, client, idle_timeout=0.3))
    assert "no data for 0.3 s" in err.message


async def test_stream_cut_before_message_stop_is_an_error(fake, client):
    fake.default = Script(stop=False)
    err = await failure(provider(fake, client))
    assert "before message_stop" in err.message


async def test_dropped_connection_is_an_error(fake, client):
    fake.default = Script(chunks=["a", "b", "c"], drop_after=1)
    err = await failure(provider(fake, client))
    assert "cut off" in err.message


async def test_connection_is_reused_across_turns(fake, client):
    p = provider(fake, client)
    for _ in range(3):
        await collect(p)
    assert fake.connections == 1


async def test_model_list_follows_pages(fake, client):
    models = await provider(fake, client).list_models()
    assert models == [ModelInfo("claude-sonnet-4-5", "Claude Sonnet 4.5"),
                      ModelInfo("claude-haiku-4-5", "Claude Haiku 4.5"),
                      ModelInfo("claude-opus-4-1", "Claude Opus 4.1")]
    assert [r.path for r in fake.requests] == ["/v1/models?limit=1000",
                                               "/v1/models?limit=1000&after_id=claude-haiku-4-5"]

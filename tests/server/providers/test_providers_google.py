"""The native Gemini provider against a real fake Gemini API on 127.0.0.1."""

import time

import httpx
import pytest

from seed_agents.server.providers.base import ChatMessage, ModelInfo, ProviderError, ProviderSpec, TextDelta, Usage
from seed_agents.server.providers.google import GoogleProvider

from tests.fakes.google_server import FakeGoogle
from tests.fakes.sse_base import Script

KEY = "AIza-test-SEKRIT-5c2e9f"
MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Say hi"),
            ChatMessage("assistant", "hi"), ChatMessage("user", "again")]


@pytest.fixture
async def client():
    async with httpx.AsyncClient(trust_env=False) as c:
        yield c


@pytest.fixture
async def fake():
    async with FakeGoogle(key=KEY) as f:
        yield f


def provider(fake, client, *, key=KEY, defaults=None, **timeouts):
    timeouts = {"first_token_timeout": 5.0, "idle_timeout": 5.0, **timeouts}
    spec = ProviderSpec("google", base_url=fake.base_url, api_key=key, model_defaults=defaults or {})
    return GoogleProvider(spec, client, **timeouts)


async def collect(p, model="gemini-test"):
    return [item async for item in p.stream(model, MESSAGES)]


async def failure(p) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await collect(p)
    assert KEY not in info.value.message
    return info.value


async def test_streams_text_then_usage(fake, client):
    fake.default = Script(chunks=["Hel", "lo", " there"])
    items = await collect(provider(fake, client))
    assert items == [TextDelta("Hel"), TextDelta("lo"), TextDelta(" there"),
                     Usage(input=10, output=10, cache_read=2, cache_write=0, total=22)]


async def test_request_follows_the_gemini_api_and_keeps_the_key_out_of_the_url(fake, client):
    await collect(provider(fake, client, defaults={"generationConfig": {"temperature": 0.1}}),
                  model="models/gemini-2.5-flash")
    [req] = fake.requests
    assert req.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == KEY and KEY not in req.path
    assert req.body == {
        # No reasoning level: thinking off, where the model allows it (providers/reasoning.py).
        "generationConfig": {"temperature": 0.1, "thinkingConfig": {"thinkingBudget": 0}},
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Say hi"}]},
                     {"role": "model", "parts": [{"text": "hi"}]},
                     {"role": "user", "parts": [{"text": "again"}]}],
    }


async def test_thought_parts_are_not_the_reply(fake, client):
    fake.default = Script(chunks=["x"])
    p = provider(fake, client)
    # A thought part comes through the same stream; only the real text is the reply.
    original = fake._events

    def with_thought(script, request):
        events = original(script, request)
        thought = (b'data: {"candidates":[{"content":{"parts":[{"text":"thinking...",'
                   b'"thought":true}],"role":"model"},"index":0}]}\r\n\r\n', False)
        return [thought, *events]

    fake._events = with_thought
    assert [i for i in await collect(p) if isinstance(i, TextDelta)] == [TextDelta("x")]


async def test_mid_stream_error_is_a_fixed_phrase(fake, client, caplog):
    fake.default = Script(chunks=["a", "b", "c"], error_after=1, error_message="model melted")
    got = []
    with pytest.raises(ProviderError) as info:
        async for item in provider(fake, client).stream("m", MESSAGES):
            got.append(item)
    assert got == [TextDelta("a")]
    assert info.value.message.endswith("HTTP 503 (the provider is unavailable)")
    assert "melted" not in info.value.message and "melted" in caplog.text


async def test_429_is_rate_limited(fake, client):
    fake.default = Script(status=429, error_message="Resource has been exhausted")
    err = await failure(provider(fake, client))
    assert err.status == 429 and err.message.endswith("HTTP 429 (rate limited by the provider)")
    assert "exhausted" not in err.message


async def test_wrong_key(fake, client):
    err = await failure(provider(fake, client, key="AIza-wrong"))
    assert err.message.endswith("HTTP 400 (the provider refused the request)")


async def test_first_token_stall_times_out(fake, client):
    fake.default = Script(first_delay=30)
    started = time.monotonic()
    err = await failure(provider(fake, client, first_token_timeout=0.3))
    assert "no first token within 0.3 s" in err.message
    assert time.monotonic() - started < 3


async def test_end_without_finish_reason_is_cut_off(fake, client):
    fake.default = Script(stop=False)
    err = await failure(provider(fake, client))
    assert "without a finishReason" in err.message


async def test_model_list_follows_pages_and_skips_models_that_cannot_chat(fake, client):
    models = await provider(fake, client).list_models()
    assert models == [ModelInfo("gemini-2.5-flash", "Gemini 2.5 Flash"),
                      ModelInfo("gemini-2.5-pro", "Gemini 2.5 Pro")]
    assert len(fake.requests) == 2 and all(KEY not in r.path for r in fake.requests)

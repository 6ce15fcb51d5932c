"""What one model step may send, in each provider family (server/providers/http_stream.py
StreamLimits, counted by each parser): text past the step's characters, more tool calls than the
step's bound, and one stream event past its size each end the stream with a ProviderError naming
the setting, and nothing past the bound is yielded. Against each family's fake (real HTTP on
127.0.0.1), with small limits so the bounds are crossed in a few events."""
from __future__ import annotations

import httpx
import pytest

from seed_agents.server.providers.anthropic import AnthropicProvider
from seed_agents.server.providers.base import ChatMessage, ProviderError, ProviderSpec, TextDelta, ToolCall
from seed_agents.server.providers.google import GoogleProvider
from seed_agents.server.providers.http_stream import StreamLimits
from seed_agents.server.providers.openai_compat import OpenAICompatProvider

from tests.fakes import openai_server
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.sse_base import Script

KEY = "sk-step-limits"
LIMITS = StreamLimits(event_chars=4_000, step_chars=100, calls=3)
MESSAGES = [ChatMessage("user", "go")]
FAMILIES = {
    "openai": (openai_server.FakeOpenAI, openai_server.Script, OpenAICompatProvider, "openai"),
    "anthropic": (FakeAnthropic, Script, AnthropicProvider, "anthropic"),
    "google": (FakeGoogle, Script, GoogleProvider, "google"),
}


@pytest.fixture(params=sorted(FAMILIES))
async def family(request):
    fake_cls, script_cls, provider_cls, kind = FAMILIES[request.param]
    fake = fake_cls() if kind == "openai" else fake_cls(key=KEY)
    async with fake, httpx.AsyncClient(trust_env=False) as client:
        spec = ProviderSpec(kind, base_url=fake.base_url, api_key=KEY)
        yield fake, script_cls, provider_cls(spec, client, first_token_timeout=5.0, idle_timeout=5.0, limits=LIMITS)


async def stopped(provider) -> tuple[list, ProviderError]:
    got: list = []
    with pytest.raises(ProviderError) as info:
        async for item in provider.stream("model", MESSAGES):
            got.append(item)
    return got, info.value


async def test_text_past_the_step_bound_ends_the_step(family):
    fake, script, provider = family
    fake.default = script(chunks=["x" * 30] * 10)
    got, error = await stopped(provider)
    assert "--max-step-output-chars" in error.message and "more than 100 characters" in error.message
    assert sum(len(i.text) for i in got if isinstance(i, TextDelta)) <= 100


async def test_more_tool_calls_than_the_step_bound_end_the_step(family):
    """(Calls yielded before the error never run: the tool loop runs a step's calls once its
    stream has ended, and this one ends in the error.)"""
    fake, script, provider = family
    fake.default = script(chunks=["ok"], tool_calls=[{"id": f"c{i}", "name": "read", "arguments": {}}
                                                     for i in range(4)])
    got, error = await stopped(provider)
    assert "--max-tool-calls-per-step" in error.message and "more than 3 tool calls" in error.message
    assert len([i for i in got if isinstance(i, ToolCall)]) <= 3


async def test_arguments_count_toward_the_step(family):
    fake, script, provider = family
    fake.default = script(chunks=["ok"], tool_calls=[{"id": "c1", "name": "write", "arguments": {"content": "y" * 300}}])
    _got, error = await stopped(provider)
    assert "--max-step-output-chars" in error.message


async def test_one_stream_event_past_its_bound_is_not_read(family):
    fake, script, provider = family
    fake.default = script(chunks=["z" * 5_000])
    got, error = await stopped(provider)
    assert "--max-model-event-chars" in error.message and "longer than 4000 characters" in error.message
    assert not [i for i in got if isinstance(i, TextDelta)]

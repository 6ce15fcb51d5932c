"""The fake OpenAI server itself: run as a separate process, driven over HTTP, and through
make_provider the way the runtime uses it."""

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from seed_agents.server.providers.base import ChatMessage, ProviderError, ProviderSpec, TextDelta, Usage
from seed_agents.server.providers.registry import ProviderSettings, make_provider

from tests.fakes.openai_server import FakeOpenAI, Script

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def client():
    async with httpx.AsyncClient(trust_env=False) as c:
        yield c


async def reply(provider, text="hi there"):
    items = [i async for i in provider.stream("m", [ChatMessage("user", text)])]
    return "".join(i.text for i in items if isinstance(i, TextDelta)), items


async def test_echo_script_and_make_provider_with_a_pasted_key(client):
    async with FakeOpenAI(Script(echo=True)) as fake:
        spec = ProviderSpec("openai", base_url=fake.base_url, api_key=" sk-pasted\n")
        text, items = await reply(make_provider(spec, client, ProviderSettings(allow_base_url=True)),
                                  "one  two")
        assert text == "echo: one  two"
        assert isinstance(items[-1], Usage)
        assert fake.requests[0].headers["authorization"] == "Bearer sk-pasted"


async def test_models_route_and_unknown_route(client):
    async with FakeOpenAI() as fake:
        assert (await client.get(fake.base_url + "/models")).json()["data"][0]["id"]
        assert (await client.get(fake.base_url + "/nope")).status_code == 404


async def test_separate_process_with_http_control(client):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.openai_server", "--port", "0", "--mode", "plain",
        "--text", "hello from afar",
        cwd=ROOT, stdout=subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 10)
        marker, base_url = line.decode().split()
        assert marker == "FAKE_OPENAI_LISTENING" and base_url.startswith("http://127.0.0.1:")
        provider = make_provider(ProviderSpec("custom", base_url=base_url), client)

        assert (await reply(provider))[0] == "hello from afar"

        queued = await client.post(base_url.rsplit("/v1", 1)[0] + "/_fake/script",
                                   json={"status": 503, "error_body": "try later"})
        assert queued.json() == {"queued": 1}
        with pytest.raises(ProviderError, match=r"HTTP 503 \(the provider is unavailable\)$"):
            await reply(provider)
        assert (await reply(provider))[0] == "hello from afar"  # back to the default

        report = (await client.get(base_url.rsplit("/v1", 1)[0] + "/_fake/requests")).json()
        assert len(report["requests"]) == 3
        first = report["requests"][0]["body"]
        assert first["messages"] == [{"role": "user", "content": "hi there"}]
        assert report["disconnects"] == []
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0

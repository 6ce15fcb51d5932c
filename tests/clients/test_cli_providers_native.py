"""The README's Anthropic and Google lines (`providers set claude --type anthropic --api-key-env
ANTHROPIC_API_KEY`, then `agents create --provider claude --model M`) against a real server and
the providers' fakes on loopback. Hosted types talk to their public endpoint; the operator
setting `--allow-provider-base-url true` lets these tests point them at the fakes instead."""
from __future__ import annotations

import pytest

from tests.conftest import make_config, running_server
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.sse_base import Script
from tests.clients.test_cli_commands import cli_env, run_cli

KEY = "native-fake-key-0123456789"


@pytest.fixture
async def operator_server(tmp_path):
    async with running_server(make_config(tmp_path, allow_provider_base_url=True)) as running:
        yield running


@pytest.mark.parametrize("fake_class,ptype,name,variable,model,key_header", [
    (FakeAnthropic, "anthropic", "claude", "ANTHROPIC_API_KEY", "claude-3-5-haiku-latest", "x-api-key"),
    (FakeGoogle, "google", "gemini", "GEMINI_API_KEY", "gemini-2.5-flash", "x-goog-api-key"),
])
async def test_the_readme_native_provider_lines_answer_a_turn(operator_server, tmp_path, fake_class, ptype,
                                                            name, variable, model, key_header):
    async with fake_class(Script(chunks=["Hello", " from ", ptype]), key=KEY) as fake:
        env = cli_env(tmp_path, operator_server.url, **{variable: KEY})
        assert (await run_cli(env, "keygen"))[0] == 0
        code, out, err = await run_cli(env, "providers", "set", name, "--type", ptype, "--api-key-env",
                                       variable, "--model", model, "--base-url", fake.base_url)
        assert code == 0, err
        assert err == (f"provider {name} ({ptype}) is set; its API key is stored as the secret "
                       f"provider-{name}-api-key\ncreate an agent that uses it with:\n")
        assert out == f"seed-agents agents create --name NAME --provider {name} --model {model}\n"
        code, out, _ = await run_cli(env, "providers", "list")
        assert [name, ptype, "stored"] in [line.split()[:3] for line in out.splitlines()]

        code, agent_id, err = await run_cli(env, "agents", "create", "--name", name, "--provider", name,
                                            "--model", model)
        assert code == 0, err
        session_id = (await run_cli(env, "sessions", "create", agent_id.strip()))[1].strip()
        code, out, err = await run_cli(env, "send", session_id, "hello there")
        assert (code, out) == (0, f"Hello from {ptype}\n"), err

        [request] = fake.requests
        assert request.headers[key_header] == KEY
        assert model in request.path or (request.body or {}).get("model") == model

"""`seed-agents providers set/list` then `agents create --provider` against a real server whose
provider is a fake OpenAI-compatible service on loopback: a real model in one command, the key
never on the command line nor in any output."""
from __future__ import annotations

import httpx
import pytest

from tests.procs import FakeProcess
from tests.clients.test_cli_commands import cli_env, run_cli

KEY = "sk-fake-0123456789-SECRET"


@pytest.fixture
def fake():
    proc = FakeProcess("plain")
    yield proc
    proc.close()


async def test_providers_set_list_and_a_chat_turn_through_the_fake(server, tmp_path, fake):
    env = cli_env(tmp_path, server.url, FAKE_KEY=KEY)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, out, err = await run_cli(env, "providers", "set", "fake", "--type", "custom", "--base-url",
                                   fake.base_url, "--api-key-env", "FAKE_KEY", "--model", "fake-model")
    assert code == 0, err
    assert err == ("provider fake (custom) is set; its API key is stored as the secret "
                   "provider-fake-api-key\ncreate an agent that uses it with:\n")
    assert out == "seed-agents agents create --name NAME --provider fake --model fake-model\n"

    code, out, err = await run_cli(env, "providers", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "API", "KEY", "MODEL"]   # a header row
    assert any(line.split() == ["echo", "echo", "none", "echo"] for line in lines)
    assert [line.split() for line in lines if line.startswith("fake ")] == [
        ["fake", "custom", "stored", "fake-model"]]

    code, out, err = await run_cli(env, "agents", "create", "--name", "real", "--provider", "fake",
                                   "--model", "fake-model")
    assert code == 0, err
    agent_id = out.strip()
    session_id = (await run_cli(env, "sessions", "create", agent_id))[1].strip()
    code, out, err = await run_cli(env, "send", session_id, "hello fake")
    assert (code, out) == (0, "Hello from the fake\n"), err

    recorded = httpx.get(fake.base_url.rsplit("/v1", 1)[0] + "/_fake/requests", timeout=5).json()
    chat = [r for r in recorded["requests"] if r["path"].endswith("/chat/completions")]
    assert len(chat) == 1
    assert chat[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert chat[0]["body"]["model"] == "fake-model"
    assert chat[0]["body"]["messages"][-1]["content"] == "hello fake"


async def test_the_key_comes_from_a_file_or_stdin_never_the_command_line(server, tmp_path, fake):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    key_file = tmp_path / "key.txt"
    key_file.write_text(KEY + "\n")
    code, out, err = await run_cli(env, "providers", "set", "f1", "--type", "custom", "--base-url",
                                   fake.base_url, "--api-key-file", str(key_file))
    assert (code, out) == (0, ""), err
    code, out, err = await run_cli(env, "providers", "set", "f2", "--type", "openai",
                                   "--api-key-file", "-", stdin=(KEY + "\n").encode())
    assert code == 0, err
    code, out, err = await run_cli(env, "providers", "list")
    rows = [line.split()[:3] for line in out.splitlines()]
    assert ["f1", "custom", "stored"] in rows and ["f2", "openai", "stored"] in rows
    for text in (out, err):
        assert KEY not in text
    # There is no flag that takes the key itself.
    code, out, err = await run_cli(env, "providers", "set", "f3", "--type", "openai", "--api-key", KEY)
    assert code == 2 and "error: ambiguous option: --api-key" in err and KEY not in err


@pytest.mark.parametrize("args,env,sentence", [
    (["--type", "openai"], {},
     "seed-agents: --type openai needs an API key: give --api-key-env VAR (a variable holding it) "
     "or --api-key-file FILE (- reads it from stdin)"),
    (["--type", "openai", "--api-key-env", "NOPE_UNSET"], {},
     "seed-agents: the variable NOPE_UNSET is not set or empty; export the API key in it first "
     "(e.g. `read -s NOPE_UNSET; export NOPE_UNSET`)"),
    (["--type", "custom"], {},
     "seed-agents: --type custom needs --base-url URL (the server's OpenAI-compatible /v1 URL)"),
    (["--type", "openai", "--api-key-file", "/nonexistent/key"], {},
     "seed-agents: cannot read the API key file /nonexistent/key: No such file or directory"),
])
async def test_provider_mistakes_are_one_sentence(tmp_path, args, env, sentence):
    code, out, err = await run_cli(cli_env(tmp_path, "ws://127.0.0.1:9/agents/ws", **env),
                                   "providers", "set", "p", *args)
    assert (code, out, err) == (2, "", sentence + "\n")


async def test_ollama_needs_no_key(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, out, err = await run_cli(env, "providers", "set", "local", "--type", "ollama", "--model", "llama3.2")
    assert code == 0, err
    assert err.startswith("provider local (ollama) is set\n")
    code, out, _ = await run_cli(env, "providers", "list")
    assert ["local", "ollama", "none"] in [line.split()[:3] for line in out.splitlines()]


async def test_a_delegated_signer_sees_the_agents_of_the_account_it_acts_for(server, tmp_path):
    """The desktop's account (here a key of the test) delegates to the CLI's key; with
    --account the CLI then lists that account's agents, not its own."""
    import time

    from seed_agents.clients import AgentsClient
    from seed_agents.protocol.wire.capability import make_capability
    from seed_agents.protocol.wire.keys import Keypair

    desktop = Keypair.generate()
    async with AgentsClient.connect(server.url, desktop) as client:
        agent_id = (await client.create_agent({"name": "desk", "systemPrompt": "", "modelProvider": "echo",
                                               "model": "echo"}))["agentId"]
    env = cli_env(tmp_path, server.url)
    code, cli_account, _ = await run_cli(env, "keygen")
    from seed_agents.protocol.wire.principals import principal_from_string

    cap = make_capability(desktop, principal_from_string(cli_account.strip()), "WRITER",
                          int(time.time() * 1000))
    (tmp_path / "cap.cbor").write_bytes(cap)
    code, out, err = await run_cli(env, "agents", "list")
    assert (code, out) == (0, ""), err                     # its own account has no agent
    code, out, err = await run_cli(env, "signers", "register", str(tmp_path / "cap.cbor"))
    assert code == 0 and f"--account {desktop.account_id}" in err, err
    code, out, err = await run_cli(env, "agents", "list", "--account", desktop.account_id)
    assert code == 0 and out.splitlines()[1].startswith(agent_id) and "desk" in out, err   # under the header
    code, out, err = await run_cli(env, "agents", "list", "--account", "nope")
    assert code == 2 and err.startswith("seed-agents: --account 'nope' is not an account id")


async def test_providers_delete_takes_the_key_with_it_unless_another_provider_names_it(server, tmp_path, fake):
    """`providers delete` against a real server: the provider leaves the listing, its key's
    secret goes with it once no other provider names that secret, and mistakes are one sentence."""
    from seed_agents.clients import AgentsClient
    from seed_agents.clients.keyfile import read_key

    env = cli_env(tmp_path, server.url, FAKE_KEY=KEY)
    assert (await run_cli(env, "keygen"))[0] == 0
    code, _, err = await run_cli(env, "providers", "set", "fake", "--type", "custom", "--base-url",
                                 fake.base_url, "--api-key-env", "FAKE_KEY")
    assert code == 0, err
    # A second provider naming the same secret (as a script may set up), and an agent on each.
    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        for name in ("twin", "probe"):
            await client.set_model_provider(name, {"type": "custom", "baseUrl": fake.base_url,
                                                   "secretRefs": {"apiKey": "provider-fake-api-key"}})
        agents = {name: (await client.create_agent({"name": name, "systemPrompt": "", "modelProvider": name,
                                                    "model": "fake-model"}))["agentId"]
                  for name in ("twin", "probe")}

    async def send(agent: str) -> tuple[int, str, str]:
        session_id = (await run_cli(env, "sessions", "create", agents[agent]))[1].strip()
        return await run_cli(env, "send", session_id, "hello")

    code, out, err = await run_cli(env, "providers", "delete", "fake")
    assert (code, out) == (0, ""), err
    assert err == ("provider fake is deleted, and its stored API key with it (kept only while another "
                   "provider names the same secret); agents that use it fail their turns until "
                   "`seed-agents providers set fake ...` sets it again\n")
    code, out, _ = await run_cli(env, "providers", "list")
    names = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and "fake" not in names and "twin" in names
    # twin and probe still name the secret: it stayed, and a turn through it still works.
    assert await send("twin") == (0, "Hello from the fake\n", "")

    assert (await run_cli(env, "providers", "delete", "twin"))[0] == 0
    assert await send("probe") == (0, "Hello from the fake\n", "")
    code, _, err = await run_cli(env, "providers", "delete", "probe")
    assert code == 0 and err.startswith("provider probe is deleted, and its stored API key with it"), err
    # The last provider naming it is gone, so is the secret: a provider naming it now fails.
    async with AgentsClient.connect(server.url, read_key(tmp_path / "key.json")) as client:
        await client.set_model_provider("probe", {"type": "custom", "baseUrl": fake.base_url,
                                                  "secretRefs": {"apiKey": "provider-fake-api-key"}})
    code, out, err = await send("probe")
    assert (code, out, err) == (1, "", "the agent failed: secret 'provider-fake-api-key' named by "
                                       "provider 'probe' is not set\n")

    code, out, err = await run_cli(env, "providers", "delete", "fake")
    assert (code, out, err) == (1, "", "seed-agents: you have no provider 'fake'; `seed-agents "
                                       "providers list` shows yours\n")
    code, out, err = await run_cli(env, "providers", "delete", "echo")
    assert (code, out, err) == (1, "", "seed-agents: the provider 'echo' is built in and cannot be deleted\n")


async def test_deleting_a_provider_without_a_key_says_nothing_of_one(server, tmp_path):
    env = cli_env(tmp_path, server.url)
    assert (await run_cli(env, "keygen"))[0] == 0
    assert (await run_cli(env, "providers", "set", "local", "--type", "ollama"))[0] == 0
    code, out, err = await run_cli(env, "providers", "delete", "local")
    assert (code, out, err) == (0, "", "provider local is deleted; agents that use it fail their turns "
                                       "until `seed-agents providers set local ...` sets it again\n")
    code, out, _ = await run_cli(env, "providers", "list")
    assert "local" not in [line.split()[0] for line in out.splitlines()]

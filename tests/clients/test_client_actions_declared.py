"""Each action declared once: an action of `seed_agents.protocol.api.actions.ACTIONS` has its builder in
clients/actions.py and its method on `AgentsClient` (the snake_case of its name), and what the
builder sends is what the protocol's parser reads. Fails when an action is added without them."""
from __future__ import annotations

import inspect
import re

import pytest

from seed_agents.clients import actions as builders
from seed_agents.clients.client import AgentsClient
from seed_agents.protocol.api.actions import ACTIONS, parse_action


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_action_has_a_builder_that_names_it():
    missing = [name for name in ACTIONS if not callable(getattr(builders, snake(name), None))]
    assert missing == [], f"actions without a builder in clients/actions.py: {missing}"
    for name in ACTIONS:
        source = inspect.getsource(getattr(builders, snake(name)))
        assert f'"{name}"' in source, f"seed_agents.clients.actions.{snake(name)} does not build {name}"


def test_every_action_has_a_client_method_that_uses_its_builder():
    """Written by hand (when it does more than send) or derived from the builder."""
    missing = [name for name in ACTIONS if not callable(getattr(AgentsClient, snake(name), None))]
    assert missing == [], f"actions without a method on AgentsClient: {missing}"
    for name in ACTIONS:
        if name == "Subscribe":   # a subscription object, not a request (clients/subscription.py)
            continue
        method = getattr(AgentsClient, snake(name))
        if getattr(method, "__wrapped__", None) is getattr(builders, snake(name)):
            continue   # derived
        source = inspect.getsource(method)
        assert f"actions.{snake(name)}(" in source, f"AgentsClient.{snake(name)} does not send {name}"


# One call per builder added with the tools, runs, MCP and file actions: the map each one makes
# is read by the protocol's own parser without a fault.
SAMPLES = [
    builders.list_provider_models("openai", "a1"),
    builders.upload_agent_memory_file_to_ipfs("a1", "notes/a.md"),
    builders.list_agent_tools("a1"),
    builders.save_agent_tool("a1", {"name": "shout", "description": "Shout it.",
                                    "input": {"type": "object", "properties": {}},
                                    "source": "export default (input) => input"}, enabled=True),
    builders.save_agent_tool("a1", {"name": "search"}, enabled=False),
    builders.delete_agent_tool("a1", "shout"),
    builders.invoke_session_tool("s1", "read", {"address": "~/self"}),
    builders.signal_run("r1", "approve", {"ok": True}),
    builders.get_run_journal("r1", after_seq=3, limit=10),
    builders.list_mcp_servers(),
    builders.set_mcp_server("docs", "https://mcp.example.test/mcp", {"x-team": "a"}, {"authorization": "Bearer t"}),
    builders.delete_mcp_server("docs"),
    builders.refresh_mcp_server("docs"),
    builders.begin_file_upload({"kind": "memory", "agentId": "a1", "path": "big.bin"}, 10),
    builders.append_file_upload_chunk("u1", 0, b"0123456789"),
    builders.commit_file_upload("u1", "0" * 64),
    builders.abort_file_upload("u1"),
]


@pytest.mark.parametrize("action", SAMPLES, ids=[a["_"] + str(i) for i, a in enumerate(SAMPLES)])
def test_what_a_builder_sends_the_parser_reads(action):
    parsed = parse_action({**action, "ts": 1_700_000_000_000})
    assert type(parsed).__name__ == action["_"]


async def test_the_added_methods_reach_a_real_server(server):
    """A few of the methods added here, against a real server: the answers the contract names."""
    from seed_agents.protocol.wire.keys import Keypair

    async with AgentsClient.connect(server.url, Keypair.generate()) as client:
        agent_id = (await client.create_agent({"name": "helper", "systemPrompt": "be brief", "modelProvider": "echo",
                                                 "model": "echo"}))["agentId"]
        tools = await client.list_agent_tools(agent_id)
        assert tools["_"] == "ListAgentToolsResponse" and tools["tools"]
        assert (await client.list_mcp_servers())["servers"] == []
        models = await client.list_provider_models("echo")
        assert models["_"] == "ListProviderModelsResponse"
        journal = client.get_run_journal("no-such-run")
        with pytest.raises(Exception) as caught:
            await journal
        assert getattr(caught.value, "status", None) == 404


def _hand_written_pairs():
    for name in ACTIONS:
        method = getattr(AgentsClient, snake(name), None)
        builder = getattr(builders, snake(name), None)
        if name == "Subscribe" or method is None or getattr(method, "__wrapped__", None) is builder:
            continue
        yield name, method, builder


async def test_a_written_method_hands_each_argument_to_the_field_of_its_name():
    """A method written by hand passes its arguments on by position or by name: each must reach
    the builder's parameter of the same name (a swap sends one field's value as another's)."""
    checked = []
    for name, method, builder in _hand_written_pairs():
        params = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
        builder_params = inspect.signature(builder).parameters
        if not params or any(p.name not in builder_params or p.kind is p.VAR_KEYWORD for p in params):
            continue
        values = {p.name: f"<{p.name}>" for p in params}
        try:
            expected = builder(**values)
        except Exception:   # a builder that checks or encodes its values: not judged by strings
            continue
        sent = []

        class Recorder:
            server_key = None   # (no key pinned: nothing is verified)

            async def call(self, action):
                sent.append(action)
                return {}

        await method(Recorder(), **values)
        assert sent == [expected], f"AgentsClient.{snake(name)} sends {sent}, the builder {expected}"
        checked.append(name)
    assert {"SaveAgentTool", "GetRunJournal", "SetMcpServer"} <= set(checked), checked

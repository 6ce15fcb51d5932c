"""One provider table (protocol/agent/providers.py) that the server, the client and the command line
read: these fail when a list of provider types appears anywhere else, or a reader disagrees."""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import httpx
import pytest

from seed_agents.clients.cli import build_parser
from seed_agents.protocol.api import actions
from seed_agents.protocol.agent import providers as table
from seed_agents.server.providers import registry
from seed_agents.server.providers.base import ProviderSpec

ROOT = Path(__file__).resolve().parents[2]


def test_every_family_has_a_class_and_every_type_builds_one():
    assert set(registry.FAMILIES) == table.FAMILIES
    settings = registry.ProviderSettings()
    client = httpx.AsyncClient()
    for entry in table.TABLE:
        spec = ProviderSpec(entry.name, None if entry.base_url else "http://127.0.0.1:9/v1", api_key="k")
        provider = registry.make_provider(spec, client, settings)
        assert isinstance(provider, registry.FAMILIES[entry.family]), entry.name


def test_the_parser_and_the_registry_accept_exactly_the_tables_types():
    assert actions.PROVIDER_TYPES == registry.SUPPORTED_TYPES == table.PROVIDER_TYPES
    for kind in table.PROVIDER_TYPES:
        registry.check_spec(ProviderSpec(kind, "http://127.0.0.1:9/v1", api_key="k"))
    with pytest.raises(Exception):
        registry.check_spec(ProviderSpec("nope", "http://127.0.0.1:9/v1", api_key="k"))


def _choices_of(parser: argparse.ArgumentParser, *path: str) -> tuple:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return tuple(next(a for a in parser._actions if "--type" in a.option_strings).choices)


def test_the_command_line_offers_every_addable_type_in_the_tables_order():
    assert _choices_of(build_parser(), "providers", "set") == table.ADDABLE_TYPES
    assert table.BUILTIN_PROVIDER not in table.ADDABLE_TYPES


def _type_lists(source: str) -> list[int]:
    """Lines of literal collections naming two or more provider types. A dict whose values are
    code (a dispatch by family, or the reasoning rules the reference has for three types) is not
    a list of types; one whose values are data (URLs, flags) is."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Set, ast.List, ast.Tuple, ast.Dict)):
            continue
        if isinstance(node, ast.Dict) and not any(isinstance(v, ast.Constant) for v in node.values):
            continue
        items = node.keys if isinstance(node, ast.Dict) else node.elts
        names = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if len(names & table.PROVIDER_TYPES) >= 2:
            found.append(node.lineno)
    return found


def test_no_other_module_lists_provider_types():
    lists = {}
    for package in ("protocol", "server", "clients"):
        for path in (ROOT / package).rglob("*.py"):
            if path == ROOT / "protocol" / "providers.py":
                continue
            lines = _type_lists(path.read_text())
            if lines:
                lists[str(path.relative_to(ROOT))] = lines
    assert lists == {}, f"provider types listed outside protocol/agent/providers.py: {lists}"


def test_the_drift_finder_finds_a_list():
    source = ('TYPES = ("openai", "anthropic")\n'
              'URLS = {"groq": "https://x", "xai": "https://y"}\n'
              'ONE = ("openai", "x")\n'
              'DISPATCH = {"openai": f, "google": g}\n')
    assert _type_lists(source) == [1, 2]


def test_capabilities_are_columns_of_the_row_not_keyed_by_type_name(monkeypatch):
    """Images and reasoning levels come from a row's `images` and `reasoning` columns: a new type
    that names the rules gets them with no other line, and a row naming none gets neither."""
    from seed_agents.protocol.agent import model_rules
    from seed_agents.protocol.agent.reasoning import model_reasoning_support
    from seed_agents.server.providers.capabilities import accepts_images

    for row in table.TABLE:
        assert accepts_images(row.name, "gpt-4o") == (row.images is not None and row.images("gpt-4o"))
        assert (model_reasoning_support(row.name, "gpt-5") is not None) == (
            row.reasoning is not None and row.reasoning("gpt-5") is not None)
    assert not accepts_images("openrouter", "gpt-4o") and model_reasoning_support("openrouter", "gpt-5") is None
    new = table.ProviderType("azure-openai", "openai", "https://example.invalid/v1", hosted=True,
                             images=model_rules.openai_images, reasoning=model_rules.openai_reasoning)
    monkeypatch.setitem(table.BY_NAME, new.name, new)
    assert accepts_images("azure-openai", "gpt-4o") and not accepts_images("azure-openai", "gpt-3.5-turbo")
    assert model_reasoning_support("azure-openai", "gpt-5.2").levels[-1] == "xhigh"

"""The provider table: every provider type, once. The server (its parsers, its registry, its
handlers), the client and the command line all read it; tests/protocol/test_provider_table.py fails when
another list of types appears.

A type belongs to a family, which says how it is spoken to: `builtin` (answered in the server,
no network), `openai` (the OpenAI-compatible chat API), `anthropic`, `google`. Adding a type of an
existing family is one row here; a new family is a row here, its module in server/providers/ and
its line in server/providers/registry.py FAMILIES. What a type's models take (images, reasoning
levels) are columns of its row, naming rules of protocol/agent/model_rules.py: a row that names none
gets neither, whatever its family.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import model_rules as rules


@dataclass(frozen=True)
class ProviderType:
    name: str
    family: str                    # "builtin" | "openai" | "anthropic" | "google"
    base_url: str | None = None    # its public endpoint (a default for the self-hosted ones)
    hosted: bool = False           # a public service: needs a key, a stored baseUrl is ignored
                                   # unless the operator allows it (--allow-provider-base-url)
    # Capabilities, per model (protocol/agent/model_rules.py); None: no model of the type has it.
    images: Callable[[str], bool] | None = None     # accepts images in user messages
    reasoning: Callable[[str], rules.ReasoningSupport | None] | None = None   # its reasoning levels


# In the order the command line offers them (the built-in first, never offered: every account has it).
TABLE: tuple[ProviderType, ...] = (
    ProviderType("echo", "builtin"),
    ProviderType("openai", "openai", "https://api.openai.com/v1", hosted=True,
                 images=rules.openai_images, reasoning=rules.openai_reasoning),
    ProviderType("anthropic", "anthropic", "https://api.anthropic.com", hosted=True,
                 images=rules.anthropic_images, reasoning=rules.anthropic_reasoning),
    ProviderType("google", "google", "https://generativelanguage.googleapis.com", hosted=True,
                 images=rules.google_images, reasoning=rules.google_reasoning),
    ProviderType("ollama", "openai", "http://localhost:11434/v1"),
    ProviderType("openrouter", "openai", "https://openrouter.ai/api/v1", hosted=True),
    ProviderType("deepseek", "openai", "https://api.deepseek.com/v1", hosted=True),
    ProviderType("groq", "openai", "https://api.groq.com/openai/v1", hosted=True),
    ProviderType("xai", "openai", "https://api.x.ai/v1", hosted=True),
    ProviderType("custom", "openai"),
)

BY_NAME: dict[str, ProviderType] = {t.name: t for t in TABLE}
PROVIDER_TYPES: frozenset[str] = frozenset(BY_NAME)
# The built-in provider every account has under its own name (no row stored, no key).
BUILTIN_PROVIDER = next(t.name for t in TABLE if t.family == "builtin")
BUILTIN_TYPES: frozenset[str] = frozenset(t.name for t in TABLE if t.family == "builtin")
# What an account may add (the command line's `--type` choices), in the table's order.
ADDABLE_TYPES: tuple[str, ...] = tuple(t.name for t in TABLE if t.family != "builtin")
HOSTED_TYPES: frozenset[str] = frozenset(t.name for t in TABLE if t.hosted)
KEY_REQUIRED: frozenset[str] = HOSTED_TYPES   # hosted services refuse anonymous calls
DEFAULT_BASE_URLS: dict[str, str] = {t.name: t.base_url for t in TABLE if t.base_url}
FAMILIES: frozenset[str] = frozenset(t.family for t in TABLE)


def family_of(kind: str) -> str | None:
    entry = BY_NAME.get(kind)
    return None if entry is None else entry.family

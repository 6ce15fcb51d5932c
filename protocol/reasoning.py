"""Reasoning levels and which models take which: the Seed protocol's `reasoning.ts`
(agents/protocol/src/reasoning.ts at the contract's commit), in Python.

Providers gate levels per model generation (gpt-5 takes `minimal` but not `xhigh`, gpt-5.2+ the
reverse), so a level is checked against the model it will run on. How a level is said to each
provider family is server/providers/reasoning.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import quote

REASONING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")   # least to most reasoning


@dataclass(frozen=True)
class ReasoningSupport:
    levels: tuple[str, ...]   # the levels the model accepts, in display order
    off_behavior: str         # "off": no level means no reasoning; "default": the provider's own
    supports_effort_none: bool  # OpenAI's explicit `reasoning_effort: "none"` (gpt-5.1+)


_GPT5 = ReasoningSupport(("minimal", "low", "medium", "high"), "default", False)
_GPT51 = ReasoningSupport(("low", "medium", "high"), "off", True)
_GPT52_PLUS = ReasoningSupport(("low", "medium", "high", "xhigh"), "off", True)
_O_SERIES = ReasoningSupport(("low", "medium", "high"), "default", False)
_CLAUDE = ReasoningSupport(("minimal", "low", "medium", "high"), "off", False)


def _openai(model: str) -> ReasoningSupport | None:
    if re.match(r"o[134](-|$)", model):
        return _O_SERIES
    gpt = re.match(r"gpt-(\d+)(?:\.(\d+))?", model)
    if gpt is None:
        return None
    major, minor = int(gpt.group(1)), int(gpt.group(2) or "0")
    if major < 5:
        return None
    if major > 5 or minor >= 2:
        return _GPT52_PLUS
    if minor == 1:
        return _GPT51
    if model.startswith("gpt-5-chat"):   # chat-tuned 5.0 variants expose no reasoning control
        return None
    return _GPT5


def _anthropic(model: str) -> ReasoningSupport | None:
    legacy = re.match(r"claude-(\d+)-(\d+)", model)   # claude-3-7-sonnet-...
    if legacy is not None:
        major, minor = int(legacy.group(1)), int(legacy.group(2))
        if major < 3 or (major == 3 and minor < 7):
            return None
        return _CLAUDE
    if re.match(r"claude-[a-z]+-(\d+)", model):   # family first: claude-sonnet-4-5 and later
        return _CLAUDE
    return None


def _google(model: str) -> ReasoningSupport | None:
    gemini = re.match(r"gemini-(\d+)(?:\.(\d+))?", model)
    if gemini is None:
        return None
    major, minor = int(gemini.group(1)), int(gemini.group(2) or "0")
    if major < 2 or (major == 2 and minor < 5):   # thinking arrived with gemini-2.5
        return None
    # Pro-tier models cannot turn thinking off.
    return ReasoningSupport(("minimal", "low", "medium", "high"),
                            "default" if "-pro" in model else "off", False)


def model_reasoning_support(provider_type: str, model: str) -> ReasoningSupport | None:
    """What reasoning the model takes, or None when it (or its provider type) has no
    controllable reasoning. The reference knows the `openai`, `anthropic` and `google` types."""
    reader = {"openai": _openai, "anthropic": _anthropic, "google": _google}.get(provider_type)
    return None if reader is None else reader(model)


def level_problem(provider_type: str, model: str, level: str) -> str | None:
    """Why `level` cannot be used with the model (a sentence naming the levels it takes), or
    None when it can."""
    support = model_reasoning_support(provider_type, model)
    if support is None:
        return f"model {quote(model)} of a {provider_type} provider does not take a reasoning level"
    if level not in support.levels:
        return (f"model {quote(model)} does not support reasoning level {quote(level)} "
                f"(it supports: {', '.join(support.levels)})")
    return None

"""Reasoning levels and which models take which: the Seed protocol's `reasoning.ts`
(agents/protocol/src/reasoning.ts at the contract's commit), in Python.

Providers gate levels per model generation (gpt-5 takes `minimal` but not `xhigh`, gpt-5.2+ the
reverse), so a level is checked against the model it will run on: the rules are
protocol/agent/model_rules.py, and each provider type's row of protocol/agent/providers.py names its rule (the
`reasoning` column). How a level is said to each provider family is server/providers/reasoning.py.
"""
from __future__ import annotations

from ..wire.errors import quote
from .model_rules import ReasoningSupport
from .providers import BY_NAME

__all__ = ["REASONING_LEVELS", "ReasoningSupport", "level_problem", "model_reasoning_support"]

REASONING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")   # least to most reasoning


def model_reasoning_support(provider_type: str, model: str) -> ReasoningSupport | None:
    """What reasoning the model takes, or None when it (or its provider type) has no
    controllable reasoning: the `reasoning` column of the provider table (protocol/agent/providers.py)."""
    row = BY_NAME.get(provider_type)
    return None if row is None or row.reasoning is None else row.reasoning(model)


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

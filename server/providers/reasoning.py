"""A reasoning level in each provider family's own terms, written into the request body.

Which levels a model takes is protocol/agent/reasoning.py (the Seed protocol's `reasoning.ts`); the
level was checked against the model when the agent or session was saved, and is checked again
here, since a provider's type can change under its name. A level the model no longer takes is
left out (the provider's default applies) rather than failing the turn.

- OpenAI (`openai` type, chat completions): `reasoning_effort` is the level itself. A model that
  takes an explicit "none" (gpt-5.1+) gets `reasoning_effort: "none"` when no level is set,
  since those models otherwise reason by default.
- Anthropic: extended thinking, `thinking: {type: "enabled", budget_tokens}` with the budget of
  the level (below); `max_tokens` grows by the budget so the answer keeps its room, and
  `temperature` / `top_k` (which the API refuses with thinking) are dropped.
- Google: `generationConfig.thinkingConfig`. Gemini 2.5 takes a `thinkingBudget` (0 turns
  thinking off where the model allows it); Gemini 3 and later take a `thinkingLevel` (Pro:
  `low` or `high`). Thoughts are never asked back (`includeThoughts` stays off).

Thinking that streams back anyway (Anthropic `thinking_delta`, Gemini `thought` parts, OpenAI
compatible `reasoning_content`) is never answer text: each provider module skips it.
"""
from __future__ import annotations

import re

from seed_agents.protocol.agent.reasoning import model_reasoning_support

# Thinking budgets in tokens, as pi-ai (the reference's model layer) gives Anthropic. Anthropic's
# minimum budget is 1024.
ANTHROPIC_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
# Gemini 2.5 budgets: within every 2.5 model's range (Flash-Lite's floor is 512, Flash's cap 24576).
GEMINI_BUDGETS = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}


def _supported(provider_type: str, model: str, level: str | None):  # noqa: ANN202
    support = model_reasoning_support(provider_type, model)
    if support is None:
        return None, None
    return support, level if level in support.levels else None


def apply_openai(body: dict, provider_type: str, model: str, level: str | None) -> dict:
    support, level = _supported(provider_type, model, level)
    if support is None:
        return body
    if level is not None:
        body["reasoning_effort"] = level
    elif support.supports_effort_none:
        body["reasoning_effort"] = "none"
    return body


def apply_anthropic(body: dict, provider_type: str, model: str, level: str | None) -> dict:
    _support, level = _supported(provider_type, model, level)
    if level is None:
        return body
    budget = ANTHROPIC_BUDGETS[level]
    body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    body["max_tokens"] = int(body.get("max_tokens") or 0) + budget
    body.pop("temperature", None)
    body.pop("top_k", None)
    return body


def apply_google(body: dict, provider_type: str, model: str, level: str | None) -> dict:
    model = model.removeprefix("models/")
    support, level = _supported(provider_type, model, level)
    if support is None:
        return body
    config = body.get("generationConfig")
    config = dict(config) if isinstance(config, dict) else {}
    given = config.get("thinkingConfig")
    thinking = {k: v for k, v in given.items() if k not in ("thinkingBudget", "thinkingLevel")} \
        if isinstance(given, dict) else {}
    if int(re.match(r"gemini-(\d+)", model).group(1)) >= 3:
        if level is None and support.off_behavior == "default":
            return body
        if level is None:
            thinking["thinkingLevel"] = "minimal"   # the least a Gemini 3 model thinks
        elif "-pro" in model:
            thinking["thinkingLevel"] = "low" if level in ("minimal", "low") else "high"
        else:
            thinking["thinkingLevel"] = level
    elif level is not None:
        thinking["thinkingBudget"] = GEMINI_BUDGETS[level]
    elif support.off_behavior == "off":
        thinking["thinkingBudget"] = 0
    else:
        return body
    config["thinkingConfig"] = thinking
    body["generationConfig"] = config
    return body

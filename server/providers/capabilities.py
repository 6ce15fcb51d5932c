"""Which models accept images in user messages, as the reference decides it
(`agents/protocol/src/model-capabilities.ts`): model-id rules per provider family; anything
unknown is text-only, and its image attachments are described to it by name instead."""
from __future__ import annotations

import re

_OPENAI_VISION = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4-turbo)")
_OPENAI_GPT = re.compile(r"^gpt-(\d+)")
_O_SERIES = (re.compile(r"^o1(-pro)?($|-2)"), re.compile(r"^o3($|-2|-pro)"), re.compile(r"^o4-mini"))


def _openai(model: str) -> bool:
    if _OPENAI_VISION.match(model):
        return True
    gpt = _OPENAI_GPT.match(model)
    if gpt and int(gpt.group(1)) >= 5:
        return True
    return any(p.match(model) for p in _O_SERIES)


def _anthropic(model: str) -> bool:
    legacy = re.match(r"^claude-(\d+)", model)
    if legacy:
        return int(legacy.group(1)) >= 3
    return re.match(r"^claude-[a-z]+-\d+", model) is not None


def accepts_images(provider_type: str, model: str) -> bool:
    if provider_type == "openai":
        return _openai(model)
    if provider_type == "anthropic":
        return _anthropic(model)
    if provider_type == "google":
        return model.startswith("gemini-")
    return False

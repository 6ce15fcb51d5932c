"""Which models of a provider family take what: images in user messages (the reference's
`agents/protocol/src/model-capabilities.ts`) and reasoning levels (`reasoning.ts`), as model-id
rules. The provider table (protocol/agent/providers.py) names each type's rules in its `images` and
`reasoning` columns; a type whose row names none is text-only and takes no reasoning level (its
image attachments are described to it by name instead)."""
from __future__ import annotations

import re
from dataclasses import dataclass

# -- images ------------------------------------------------------------------------------------
_OPENAI_VISION = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4-turbo)")
_OPENAI_GPT = re.compile(r"^gpt-(\d+)")
_O_VISION = (re.compile(r"^o1(-pro)?($|-2)"), re.compile(r"^o3($|-2|-pro)"), re.compile(r"^o4-mini"))


def openai_images(model: str) -> bool:
    if _OPENAI_VISION.match(model):
        return True
    gpt = _OPENAI_GPT.match(model)
    if gpt and int(gpt.group(1)) >= 5:
        return True
    return any(p.match(model) for p in _O_VISION)


def anthropic_images(model: str) -> bool:
    legacy = re.match(r"^claude-(\d+)", model)
    if legacy:
        return int(legacy.group(1)) >= 3
    return re.match(r"^claude-[a-z]+-\d+", model) is not None


def google_images(model: str) -> bool:
    return model.startswith("gemini-")


# -- reasoning ---------------------------------------------------------------------------------
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


def openai_reasoning(model: str) -> ReasoningSupport | None:
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


def anthropic_reasoning(model: str) -> ReasoningSupport | None:
    legacy = re.match(r"claude-(\d+)-(\d+)", model)   # claude-3-7-sonnet-...
    if legacy is not None:
        major, minor = int(legacy.group(1)), int(legacy.group(2))
        if major < 3 or (major == 3 and minor < 7):
            return None
        return _CLAUDE
    if re.match(r"claude-[a-z]+-(\d+)", model):   # family first: claude-sonnet-4-5 and later
        return _CLAUDE
    return None


def google_reasoning(model: str) -> ReasoningSupport | None:
    gemini = re.match(r"gemini-(\d+)(?:\.(\d+))?", model)
    if gemini is None:
        return None
    major, minor = int(gemini.group(1)), int(gemini.group(2) or "0")
    if major < 2 or (major == 2 and minor < 5):   # thinking arrived with gemini-2.5
        return None
    # Pro-tier models cannot turn thinking off.
    return ReasoningSupport(("minimal", "low", "medium", "high"),
                            "default" if "-pro" in model else "off", False)

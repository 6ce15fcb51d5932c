"""What a scripted model was handed, split as the server builds it: the agent's own prompt, the
preamble the server adds after it (protocol/agent/preamble.py), and the conversation."""
from __future__ import annotations

SEED_START = "\n\nYou are the Seed Assistant."


def split_system(messages: list[dict]) -> tuple[str, str, list[dict]]:
    """(the agent's prompt, the preamble, the other messages); the preamble must be there."""
    assert messages and messages[0]["role"] == "system", messages[:1]
    content = messages[0]["content"]
    prompt, sep, rest = content.partition(SEED_START)
    assert sep, f"no Seed preamble in the system prompt: {content[:300]!r}"
    return prompt, sep.lstrip("\n") + rest, messages[1:]


def without_preamble(messages: list[dict]) -> list[dict]:
    """The messages with the system prompt cut back to the agent's own (checked present)."""
    prompt, _, rest = split_system(messages)
    return [{"role": "system", "content": prompt}, *rest]

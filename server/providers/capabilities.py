"""Which models accept images in user messages: the `images` column of the provider table
(protocol/agent/providers.py, rules in protocol/agent/model_rules.py, as the reference decides it); a type
whose row names no rule is text-only, and its image attachments are described to it by name."""
from __future__ import annotations

from seed_agents.protocol.agent.providers import BY_NAME


def accepts_images(provider_type: str, model: str) -> bool:
    row = BY_NAME.get(provider_type)
    return row is not None and row.images is not None and row.images(model)

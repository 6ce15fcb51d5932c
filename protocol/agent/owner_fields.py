"""The fields of an agent definition only its owner may change: what the agent may act as, or
reach, on the owner's account. A collaborator's UpdateAgent that changes one is 403 (CONTRACT
section 4, UpdateAgent; docs/protocol.md "Owner-only fields").

- `signingKey`, `signingKeys`: the identities the agent publishes as;
- `mcpServers`: which of the owner's MCP servers (and their secret headers) the agent calls;
- `collaboratorsPublish`: whether a collaborator may run `write hm://…` in person
  (InvokeSessionTool), publishing as those identities with no model involved (ours).
"""
from __future__ import annotations

from ..wire.errors import ProtocolError

COLLABORATORS_PUBLISH = "collaboratorsPublish"
OWNER_ONLY = ("signingKey", "signingKeys", "mcpServers", COLLABORATORS_PUBLISH)


def _value(definition: dict, key: str):  # noqa: ANN202
    value = definition.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)   # a list of names: its order says nothing
    return value


def changed(definition: dict, prior: dict, keys: tuple[str, ...] = OWNER_ONLY) -> list[str]:
    """The owner-only fields whose value differs between the two definitions."""
    return [k for k in keys if _value(definition, k) != _value(prior, k)]


def check_shape(definition: dict, where: str = "definition") -> None:
    value = definition.get(COLLABORATORS_PUBLISH)
    if value is not None and type(value) is not bool:
        raise ProtocolError(400, f"{where}.{COLLABORATORS_PUBLISH} must be a boolean")

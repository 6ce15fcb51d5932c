"""What an agent definition (or a session's model override) may name on its owner's account,
beyond its shape (protocol/api/actions.py checks that): a reasoning level the model takes, and
signing identities the owner holds. Asked by CreateAgent, UpdateAgent and UpdateSession inside
their write job, after the provider itself was found."""
from __future__ import annotations

from seed_agents.protocol.agent import owner_fields
from seed_agents.protocol.api.actions_identities import publish_granted
from seed_agents.protocol.wire.errors import ProtocolError, quote
from seed_agents.protocol.agent.providers import BUILTIN_TYPES
from seed_agents.protocol.agent.reasoning import level_problem

from ..store import providers as providers_q
from .identities import check_signing_keys


def provider_type(conn, owner: str, name: str) -> str | None:  # noqa: ANN001
    """The type of the owner's provider `name` (`echo` for the built-in), or None."""
    row = providers_q.get_provider(conn, owner, name)
    if row is not None:
        return row["config"].get("type", "")
    return name if name in BUILTIN_TYPES else None


def check_level(conn, owner: str, provider: str, model: str, level: str | None, where: str) -> None:  # noqa: ANN001
    """400 unless the model of that provider takes `level` (None always passes)."""
    if level is None:
        return
    kind = provider_type(conn, owner, provider)
    if kind is None:
        raise ProtocolError(400, f"{where}.provider {quote(provider)} is not a model provider of the "
                                 "agent's owner, so its reasoning level cannot be checked")
    problem = level_problem(kind, model, level)
    if problem is not None:
        raise ProtocolError(400, f"{where}.reasoningLevel: {problem}")


def check_definition(conn, owner: str, definition: dict, prior: dict | None = None,  # noqa: ANN001
                     role: str = "owner") -> None:
    """The definition's reasoning level fits its model, and its signing identities are the
    owner's; only the owner changes the owner-only fields (protocol/agent/owner_fields.py: signing
    identities, MCP servers, collaborators publishing; and the publish grant). `prior` is the definition replaced, on
    update."""
    level = definition.get("reasoningLevel")
    if level is not None:
        kind = provider_type(conn, owner, definition["modelProvider"]) or ""
        problem = level_problem(kind, definition["model"], level)
        if problem is not None:
            raise ProtocolError(400, f"definition.reasoningLevel: {problem}")
    owner_fields.check_shape(definition)
    check_signing_keys(conn, owner, definition, prior, role)
    if prior is not None and role != "owner":
        # (signing identities are compared as sets of names, above)
        fields = owner_fields.changed(definition, prior, ("mcpServers", owner_fields.COLLABORATORS_PUBLISH))
        if publish_granted(definition) != publish_granted(prior):
            # The "Publish Seed content" grant (`publish` in `tools`): what the agent may publish
            # as the owner's identities is the owner's to turn on or off.
            fields.append("the publish grant (tools: publish)")
        if fields:
            raise ProtocolError(403, f"Only the agent owner can change {', '.join(fields)} (the owner's MCP "
                                     "servers and publishing are the owner's to give)")

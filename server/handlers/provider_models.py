"""ListProviderModels: the model list of one of the caller's providers, asked of the provider.

An unknown provider name is 404; a provider that cannot be reached or answers with an error is
502 carrying the provider error's message (status and a fixed phrase, never the remote body,
never a stack trace); a provider that cannot be built from its stored config is 400.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError, quote

from ..providers.base import ProviderError, ProviderNotFound
from . import access
from .context import HandlerContext


async def list_provider_models(ctx: HandlerContext, env, action) -> dict:
    account = env.account_id
    if action.agent_id is not None:
        # The provider names of that agent's owner (an agent out of reach is 404). Writers
        # only: they are who pick models, and the list is a network call on the owner's key.
        account = (await ctx.db.aread(access.agent_for, env.account_id, action.agent_id, access.WRITER))["account"]
    try:
        provider = ctx.runtime.providers.provider(account, action.provider)
    except ProviderNotFound:
        raise ProtocolError(404, f"model provider {quote(action.provider)} not found") from None
    except ProviderError as exc:
        raise ProtocolError(400, exc.message) from None
    try:
        models = await provider.list_models()
    except ProviderError as exc:
        raise ProtocolError(502, f"could not list models: {exc.message}") from None
    return {"_": "ListProviderModelsResponse", "models": [m.to_wire() for m in models]}

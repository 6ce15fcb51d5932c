"""DeleteModelProvider. Agents that name the provider keep their definition and fail their next
turn with an error event that says the provider is not configured (runtime)."""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError

from ..store import provider_removal as removal_q
from .agents import BUILTIN_PROVIDERS
from .context import HandlerContext


async def delete_model_provider(ctx: HandlerContext, env, action) -> dict:
    deleted, _secret = await ctx.db.write(removal_q.delete_provider, env.account_id, action.name)
    if not deleted:
        if action.name in BUILTIN_PROVIDERS:
            raise ProtocolError(400, f"DeleteModelProvider.name {action.name!r} is built in and cannot be deleted")
        raise ProtocolError(404, f"model provider {action.name!r} not found")
    ctx.broadcaster.notify_account(env.account_id, "model-provider-changed")
    return {"_": "DeleteModelProviderResponse", "name": action.name}

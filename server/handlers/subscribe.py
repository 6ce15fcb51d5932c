"""Subscribe: the access check and the response value. The stream itself (replay, then live)
belongs to server/live/streams.py, framed and paced through the socket; server/live/grants.py
notes each subscriber's role and ends a guest's subscriptions when its access goes."""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError, quote

from .access import OWNER, READER, key_role, require
from .context import HandlerContext

_KINDS = {"agents": "agent", "sessions": "session", "runs": "run"}


def check_access(ctx: HandlerContext, account_id: str, action) -> tuple[str, str | None]:
    """(role, agent id) of the account on what the key names; 404 without read access (the
    key's form was checked by seed_agents.protocol.api.actions: `action.kind` is one of account, agents,
    sessions, runs)."""
    kind, ident = action.kind, action.target
    if kind == "account":
        if ident != account_id:
            raise ProtocolError(404, f"{quote(action.key)} not found; subscribe to account/{account_id}")
        return OWNER, None
    role, agent_id = ctx.db.read(key_role, account_id, kind, ident)
    return require(role, READER, _KINDS[kind], ident), agent_id


async def subscribe(ctx: HandlerContext, env, action) -> dict:
    role, agent_id = check_access(ctx, env.account_id, action)
    if role != OWNER and ctx.grants.changing_now(agent_id):
        # A change of access to this agent is running: wait for it, then check again. From
        # here to the hub's registration nothing awaits, so a revocation either sees this
        # subscription (and ends it) or this check sees the revocation.
        await ctx.grants.settled(agent_id)
        check_access(ctx, env.account_id, action)
    return {"_": "SubscribeResponse", "key": action.key, "accountId": env.account_id}

"""Subscribe: the access check and the response value. The stream itself (replay, then live)
belongs to server/live/streams.py, framed and paced through the socket; server/live/grants.py
notes each subscriber's role and ends a guest's subscriptions when its access goes."""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError, quote

from .access import OWNER, READER, key_role, require
from .context import HandlerContext

_KINDS = {"agents": "agent", "sessions": "session", "runs": "run"}


async def check_access(ctx: HandlerContext, account_id: str, action) -> tuple[str, str | None]:
    """(role, agent id) of the account on what the key names; 404 without read access (the
    key's form was checked by seed_agents.protocol.api.actions: `action.kind` is one of account, agents,
    sessions, runs).

    The read goes off the loop (`aread`: a reader thread on PostgreSQL). What must hold across
    that await: a revocation (a grant removed, public read off, the session or agent deleted)
    either finds this subscription registered and ends it, or this check sees the revocation.
    Re-proved after the await: if a change of access started, ran or ended meanwhile, or one is
    running on the agent, or something was deleted (`grants.moved_since`), the check waits for
    the agent's changes to settle and reads again on the loop; from that read (or from the
    await, when nothing moved) to the hub's registration (live/streams.py) nothing awaits, so
    a revocation landing during the read wins (tests/server/live/test_server_access_races.py)."""
    kind, ident = action.kind, action.target
    if kind == "account":
        if ident != account_id:
            raise ProtocolError(404, f"{quote(action.key)} not found; subscribe to account/{account_id}")
        return OWNER, None
    grants = ctx.grants
    epoch = grants.epoch
    role, agent_id = await ctx.db.aread(key_role, account_id, kind, ident)
    if grants.moved_since(epoch, agent_id):
        await grants.settled(agent_id)
        role, agent_id = ctx.db.read(key_role, account_id, kind, ident)   # no await from here on
    require(role, READER, _KINDS[kind], ident)
    grants.checked(account_id, action.key, role, agent_id)   # what `track` notes at registration
    return role, agent_id


async def subscribe(ctx: HandlerContext, env, action) -> dict:
    await check_access(ctx, env.account_id, action)
    return {"_": "SubscribeResponse", "key": action.key, "accountId": env.account_id}

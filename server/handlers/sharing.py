"""Sharing an agent: InviteAgentCollaborator, ListAgentCollaborators, RemoveAgentCollaborator,
ListAgentInvites, AcceptAgentInvite, DeclineAgentInvite, SetAgentPublicRead.

Every change of access to an agent runs under `ctx.grants.changing(agent)`, so changes to one
agent happen one at a time and a guest's Subscribe waits for them. A change that takes access
away ends the affected subscriptions *before* its write is submitted and sweeps again after the
commit (server/live/grants.py): not one event of the agent reaches them once the change commits.
"""
from __future__ import annotations

from seed_agents.protocol.wire.errors import ProtocolError

from ..store import agents as agents_q
from ..store import collaborators as collab_q
from ..store import owners as owners_q
from .access import OWNER, READER, agent_access, agent_role
from .context import HandlerContext

COLLABORATORS_CHANGED = "agent-collaborators-changed"
INVITES_CHANGED = "agent-invites-changed"


def _invitation_not_found(agent_id: str) -> ProtocolError:
    return ProtocolError(404, f"no invitation to agent {agent_id} for this account")


def _changed(ctx: HandlerContext, agent_id: str, owner: str, *also: str) -> None:
    """`agent-collaborators-changed` to the owner, the collaborators and `also` (an account
    whose relation to the agent just changed)."""
    ctx.grants.forget_audience(agent_id)
    ctx.broadcaster.notify_account(owner, COLLABORATORS_CHANGED, agent_id=agent_id)
    audience = ctx.grants.audience(agent_id)
    for account in also:
        if account != owner and account not in audience:
            ctx.broadcaster.notify_only(account, COLLABORATORS_CHANGED, agent_id=agent_id)


async def invite_agent_collaborator(ctx: HandlerContext, env, action) -> dict:
    """Owner only. Re-inviting changes the role and keeps the status: an accepted collaborator
    stays accepted (with the new role, at once), a pending invitation stays pending."""
    agent_id, invitee = action.agent_id, action.account_id
    now = ctx.now_ms()
    async with ctx.grants.changing(agent_id):
        def job(conn):
            agent_access(conn, env.account_id, agent_id, OWNER)
            if invitee == env.account_id:
                raise ProtocolError(400, "InviteAgentCollaborator.accountId is the agent's owner: "
                                         "the owner already has every right")
            return collab_q.invite(conn, agent_id, invitee, action.role, now)

        collaborator = await ctx.db.write(job)
        ctx.grants.forget_audience(agent_id)
        ctx.grants.refresh(agent_id, [invitee], f"access to agent {agent_id} changed")
    _changed(ctx, agent_id, env.account_id, invitee)
    ctx.broadcaster.notify_only(invitee, INVITES_CHANGED, agent_id=agent_id)
    return {"_": "InviteAgentCollaboratorResponse", "collaborator": collaborator}


async def list_agent_collaborators(ctx: HandlerContext, env, action) -> dict:
    """Reader: the owner first (`role: owner`), then the collaborators; pending invitations
    are shown to the owner only."""
    def read(conn):
        role = agent_access(conn, env.account_id, action.agent_id, READER)
        agent = agents_q.get_agent(conn, action.agent_id, role)
        rows = collab_q.collaborators_of(conn, action.agent_id)
        return role, agent, rows

    role, agent, rows = ctx.db.read(read)
    if role != OWNER:
        rows = [r for r in rows if r["status"] == "accepted"]
    owner = collab_q.collaborator_info(agent["account"], OWNER, "accepted", agent["createdAt"],
                                       agent["updatedAt"])
    response = {"_": "ListAgentCollaboratorsResponse", "agentId": action.agent_id,
                "publicRead": agent["publicRead"], "collaborators": [owner, *rows]}
    if role == OWNER and "publicChat" in agent:   # its limits and grants (handlers/public_chat.py)
        response["publicChat"] = agent["publicChat"]
    return response


async def remove_agent_collaborator(ctx: HandlerContext, env, action) -> dict:
    """Owner only; revokes an accepted grant or cancels a pending invitation. The account's
    subscriptions of the agent end before the write (unless public read still lets it read)."""
    agent_id, target = action.agent_id, action.account_id
    why = f"access to agent {agent_id} was removed"
    async with ctx.grants.changing(agent_id):
        def check(conn):
            agent_access(conn, env.account_id, agent_id, OWNER)
            row = collab_q.get(conn, agent_id, target)
            if row is None:
                raise ProtocolError(404, f"account {target} is not a collaborator of agent {agent_id}")
            return owners_q.agent_access(conn, agent_id)[1]

        public_read = ctx.db.read(check)
        with ctx.grants.leaving(agent_id, [target]):
            if not public_read:
                ctx.grants.cut_account(target, agent_id, why)   # before the write: nothing leaks after it

            def job(conn):
                agent_access(conn, env.account_id, agent_id, OWNER)
                if collab_q.remove(conn, agent_id, target) is None:
                    raise ProtocolError(404, f"account {target} is not a collaborator of agent {agent_id}")

            await ctx.db.write(job)
            ctx.grants.refresh(agent_id, [target], why)
    _changed(ctx, agent_id, env.account_id, target)
    ctx.broadcaster.notify_only(target, INVITES_CHANGED, agent_id=agent_id)
    return {"_": "RemoveAgentCollaboratorResponse", "agentId": agent_id, "accountId": target}


async def list_agent_invites(ctx: HandlerContext, env, action) -> dict:
    invites = await ctx.db.aread(collab_q.invites_of, env.account_id)
    return {"_": "ListAgentInvitesResponse", "invites": invites}


async def accept_agent_invite(ctx: HandlerContext, env, action) -> dict:
    """The invitee accepts; accepting again answers the same. The AgentInfo carries its role."""
    agent_id = action.agent_id
    now = ctx.now_ms()
    async with ctx.grants.changing(agent_id):
        def job(conn):
            if collab_q.accept(conn, agent_id, env.account_id, now) is None:
                raise _invitation_not_found(agent_id)
            owner = owners_q.agent_access(conn, agent_id)[0]
            return owner, agents_q.get_agent(conn, agent_id, agent_role(conn, env.account_id, agent_id))

        owner, agent = await ctx.db.write(job)
        ctx.grants.forget_audience(agent_id)
        ctx.grants.refresh(agent_id, [env.account_id], f"access to agent {agent_id} changed")
    _changed(ctx, agent_id, owner, env.account_id)
    ctx.broadcaster.notify_only(env.account_id, INVITES_CHANGED, agent_id=agent_id)
    return {"_": "AcceptAgentInviteResponse", "agent": agent}


async def decline_agent_invite(ctx: HandlerContext, env, action) -> dict:
    """The invitee declines a pending invitation (an accepted grant is the owner's to remove)."""
    agent_id = action.agent_id
    async with ctx.grants.changing(agent_id):
        def job(conn):
            if not collab_q.decline(conn, agent_id, env.account_id):
                raise _invitation_not_found(agent_id)
            return owners_q.agent_access(conn, agent_id)[0]

        owner = await ctx.db.write(job)
    _changed(ctx, agent_id, owner)
    ctx.broadcaster.notify_only(env.account_id, INVITES_CHANGED, agent_id=agent_id)
    return {"_": "DeclineAgentInviteResponse", "agentId": agent_id}


async def set_agent_public_read(ctx: HandlerContext, env, action) -> dict:
    """Owner only. Turning it off ends, before the write, the subscriptions of every account
    that read the agent only because it was public."""
    agent_id = action.agent_id
    now = ctx.now_ms()
    why = f"agent {agent_id} is no longer publicly readable"
    async with ctx.grants.changing(agent_id):
        ctx.db.read(agent_access, env.account_id, agent_id, OWNER)
        guests = ctx.grants.guest_accounts(agent_id)
        if not action.public_read and guests:
            granted = ctx.db.read(collab_q.members, agent_id)
            for account in guests:
                role, status = granted.get(account, (None, None))
                if status != "accepted":
                    ctx.grants.cut_account(account, agent_id, why)

        def job(conn):
            agent_access(conn, env.account_id, agent_id, OWNER)
            collab_q.set_public_read(conn, agent_id, action.public_read, now)
            return agents_q.get_agent(conn, agent_id, OWNER)

        agent = await ctx.db.write(job)
        ctx.grants.refresh(agent_id, ctx.grants.guest_accounts(agent_id), why)
    ctx.broadcaster.publish_agent(agent)
    _changed(ctx, agent_id, env.account_id)
    return {"_": "SetAgentPublicReadResponse", "agent": agent}

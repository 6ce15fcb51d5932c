"""ListAgentTriggers, GetAgentTrigger, CreateAgentTrigger, UpdateAgentTrigger, DeleteAgentTrigger,
and this server's FireAgentTrigger (a firing by hand, to try a trigger without waiting for it) and
MergeAgentTriggers (two activity triggers combined into one).

Readers of an agent list its triggers and their firings; writers create, change and delete them
and are the only ones shown a webhook trigger's secret (GetAgentTrigger `webhook`). A trigger
the caller cannot see is 404 with the text a missing id gets. Changes are announced to the
account as `trigger-created` / `trigger-updated` / `trigger-deleted` (the reference's reasons).
"""
from __future__ import annotations

from seed_agents.protocol.api.actions import request_fingerprint
from seed_agents.protocol.wire.errors import ProtocolError

from ..clock import new_id
from ..store import agents as agents_q
from ..store import sessions as sessions_q
from ..store import trigger_firings as firings_q
from ..store import triggers as triggers_q
from ..triggers import manage, webhook
from ..triggers.event import Event
from .access import OWNER, READER, WRITER, agent_access, agent_role, require
from .context import HandlerContext
from .idempotency import once

LIST_LIMIT = 1_000       # triggers in one ListAgentTriggers answer (the per-agent bound is lower)
SESSIONS_SHOWN = 50      # sessions a GetAgentTrigger answer lists, newest first
FIRINGS_SHOWN = 50       # firings a GetAgentTrigger answer lists, newest first


def trigger_for(conn, account_id: str, trigger_id: str, need: str) -> tuple[dict, str]:
    """(the trigger, the caller's role) once the caller's role on its agent is at least `need`."""
    row = triggers_q.trigger_access(conn, trigger_id)
    role = None
    if row is not None:
        owner, agent_id = row
        role = OWNER if owner == account_id else agent_role(conn, account_id, agent_id)
    require(role, need, "trigger", trigger_id)
    trigger = triggers_q.get_trigger(conn, trigger_id)
    if trigger is None:
        raise ProtocolError(404, f"trigger {trigger_id} not found")
    return trigger, role


async def list_agent_triggers(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, READER)
        return triggers_q.triggers_of_agent(conn, action.agent_id, LIST_LIMIT)

    triggers = await ctx.db.aread(read)
    return {"_": "ListAgentTriggersResponse", "triggers": [triggers_q.public(t) for t in triggers]}


async def get_agent_trigger(ctx: HandlerContext, env, action) -> dict:
    def read(conn):
        trigger, role = trigger_for(conn, env.account_id, action.trigger_id, READER)
        sessions = []
        for session_id, firing in firings_q.sessions_of_trigger(conn, trigger["id"], SESSIONS_SHOWN):
            session = sessions_q.get_session(conn, session_id)
            if session is not None:
                session["startedByTrigger"] = attribution(trigger, firing)
                sessions.append(session)
        firings = firings_q.firings_of_trigger(conn, trigger["id"], FIRINGS_SHOWN)
        sealed = triggers_q.credentials(conn, trigger["id"]) if role != READER else None
        return trigger, sessions, firings, sealed

    trigger, sessions, firings, sealed = await ctx.db.aread(read)
    response = {"_": "GetAgentTriggerResponse", "trigger": triggers_q.public(trigger), "sessions": sessions,
                "firings": [firings_q.public(f) for f in firings]}
    if sealed is not None and trigger["source"]["type"] == "webhook":
        response["webhook"] = {"path": webhook.hook_path(trigger["id"]),
                               "secret": webhook.open_secret(ctx.secrets, trigger["id"], sealed[1])}
    return response


def attribution(trigger: dict, firing: dict) -> dict:
    """AgentSessionTriggerSummary for a session a firing started."""
    activity = firing.get("activity") or {}
    return {"triggerId": trigger["id"], "triggerName": trigger["name"], "firingId": firing["id"],
            "activityKey": firing["activityKey"], "activitySummary": str(activity.get("summary", ""))
            or firing["activityKey"], "source": trigger["source"], "firedAt": firing["createdAt"]}


async def create_agent_trigger(ctx: HandlerContext, env, action) -> dict:
    now = ctx.triggers.now_ms()
    spec = action.trigger
    account_id = env.account_id
    secret = webhook.new_secret() if spec.source["type"] == "webhook" else None

    def effect(conn):
        role = agent_access(conn, account_id, action.agent_id, WRITER)
        owner = agents_q.agent_account(conn, action.agent_id)   # a writer's trigger is the owner's
        trigger = manage.create(conn, ctx, owner, action.agent_id, spec, now, secret, others=role == OWNER,
                                collaborator=role != OWNER)
        return {"_": "CreateAgentTriggerResponse", "trigger": triggers_q.public(trigger)}, [trigger]

    def job(conn):
        return once(conn, account_id, "CreateAgentTrigger", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await ctx.db.write(job)
    for trigger in created:
        ctx.triggers.changed(trigger)
        ctx.broadcaster.notify_account(trigger["account"], "trigger-created", agent_id=trigger["agentId"])
    return response


async def update_agent_trigger(ctx: HandlerContext, env, action) -> dict:
    now = ctx.triggers.now_ms()
    patch = action.patch
    secret = webhook.new_secret() if patch.source is not None and patch.source["type"] == "webhook" else None

    def job(conn):
        before, role = trigger_for(conn, env.account_id, action.trigger_id, WRITER)
        return manage.update(conn, ctx, before, patch, now, secret, others=role == OWNER,
                             collaborator=role != OWNER)

    trigger = await ctx.db.write(job)
    ctx.triggers.changed(trigger)
    ctx.broadcaster.notify_account(trigger["account"], "trigger-updated", agent_id=trigger["agentId"])
    return {"_": "UpdateAgentTriggerResponse", "trigger": triggers_q.public(trigger)}


async def delete_agent_trigger(ctx: HandlerContext, env, action) -> dict:
    def job(conn):
        trigger, _role = trigger_for(conn, env.account_id, action.trigger_id, WRITER)
        triggers_q.delete_trigger(conn, trigger["id"])
        return trigger

    trigger = await ctx.db.write(job)
    ctx.triggers.changed(trigger)
    ctx.broadcaster.notify_account(trigger["account"], "trigger-deleted", agent_id=trigger["agentId"])
    return {"_": "DeleteAgentTriggerResponse", "triggerId": trigger["id"]}


async def fire_agent_trigger(ctx: HandlerContext, env, action) -> dict:
    """Fire a trigger now, as its source would (the same admission: limits, backoff, the
    continuation, under the owner's authority), by a writer of its agent. The firing's key is
    `manual:<clientRequestId>`, so a retried request fires once; without one, every request fires."""
    trigger = await ctx.db.aread(lambda conn: trigger_for(conn, env.account_id, action.trigger_id, WRITER)[0])
    manage.refuse_retired(trigger)
    key = "manual:" + (action.client_request_id or new_id())
    event = Event(key, "fired by hand", {"type": "manual", "firedBy": env.account_id})
    outcome = await ctx.triggers.fire(trigger, event)
    if outcome is None:
        raise ProtocolError(409, f"trigger {trigger['id']} is off: turn it on to fire it")
    if outcome.new:
        ctx.broadcaster.notify_account(trigger["account"], "trigger-updated", agent_id=trigger["agentId"])
    firing = outcome.firing
    response = {"_": "FireAgentTriggerResponse", "firingId": firing["id"], "firingStatus": firing["status"]}
    if "sessionId" in firing:
        response["sessionId"] = firing["sessionId"]
    if firing.get("error"):
        response["error"] = firing["error"]
    return response


async def merge_agent_triggers(ctx: HandlerContext, env, action) -> dict:
    """MergeAgentTriggers (this server's extension, the storage design's merged_into): a writer of
    the agent combines two of its activity triggers in one transaction (server/triggers/manage.merge)."""
    now = ctx.triggers.now_ms()

    def job(conn):
        survivor, _ = trigger_for(conn, env.account_id, action.trigger_id, WRITER)
        retired, _ = trigger_for(conn, env.account_id, action.retired_id, WRITER)
        return manage.merge(conn, survivor, retired, action.action, now)

    survivor, retired = await ctx.db.write(job)
    for trigger in (survivor, retired):
        ctx.triggers.changed(trigger)
    ctx.broadcaster.notify_account(survivor["account"], "trigger-updated", agent_id=survivor["agentId"])
    return {"_": "MergeAgentTriggersResponse", "trigger": triggers_q.public(survivor),
            "retired": triggers_q.public(retired)}

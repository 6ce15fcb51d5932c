"""ListAgentTriggers, GetAgentTrigger, CreateAgentTrigger, UpdateAgentTrigger, DeleteAgentTrigger.

Readers of an agent list its triggers and their firings; writers create, change and delete them
and are the only ones shown a webhook trigger's secret (GetAgentTrigger `webhook`). A trigger
the caller cannot see is 404 with the text a missing id gets. Changes are announced to the
account as `trigger-created` / `trigger-updated` / `trigger-deleted` (the reference's reasons).
"""
from __future__ import annotations

from protocol.actions import request_fingerprint
from protocol.errors import ProtocolError, quote
from server.clock import new_id
from server.handlers.access import OWNER, READER, WRITER, agent_access, agent_role, require
from server.handlers.idempotency import once
from server.store import agents as agents_q
from server.store import sessions as sessions_q
from server.store import trigger_firings as firings_q
from server.store import triggers as triggers_q
from server.triggers import schedule as sched
from server.triggers import webhook

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


def _check_source(conn, owner: str, source: dict) -> None:
    """What parsing cannot know: that a zone or cron expression exists, that a named agent is
    the owner's."""
    if source["type"] == "schedule":
        try:
            sched.check(source["schedule"])
        except sched.ScheduleError as exc:
            raise ProtocolError(400, f"source.schedule: {exc}") from None
    if source["type"] == "run-completed" and "agentId" in source:
        if agents_q.agent_account(conn, source["agentId"]) != owner:
            raise ProtocolError(400, f"source.agentId {quote(source['agentId'])} is not an agent of this account")


def _first_due(source: dict, enabled: bool, now: int) -> int | None:
    if not enabled or source["type"] != "schedule":
        return None
    return sched.first_slot(source["schedule"], now)


async def list_agent_triggers(app, env, action) -> dict:
    def read(conn):
        agent_access(conn, env.account_id, action.agent_id, READER)
        return triggers_q.triggers_of_agent(conn, action.agent_id, LIST_LIMIT)

    triggers = await app.db.aread(read)
    return {"_": "ListAgentTriggersResponse", "triggers": [triggers_q.public(t) for t in triggers]}


async def get_agent_trigger(app, env, action) -> dict:
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

    trigger, sessions, firings, sealed = await app.db.aread(read)
    response = {"_": "GetAgentTriggerResponse", "trigger": triggers_q.public(trigger), "sessions": sessions,
                "firings": [firings_q.public(f) for f in firings]}
    if sealed is not None and trigger["source"]["type"] == "webhook":
        response["webhook"] = {"path": webhook.hook_path(trigger["id"]),
                               "secret": webhook.open_secret(app.secrets, trigger["id"], sealed[1])}
    return response


def attribution(trigger: dict, firing: dict) -> dict:
    """AgentSessionTriggerSummary for a session a firing started."""
    activity = firing.get("activity") or {}
    return {"triggerId": trigger["id"], "triggerName": trigger["name"], "firingId": firing["id"],
            "activityKey": firing["activityKey"], "activitySummary": str(activity.get("summary", ""))
            or firing["activityKey"], "source": trigger["source"], "firedAt": firing["createdAt"]}


async def create_agent_trigger(app, env, action) -> dict:
    now = app.triggers.now_ms()
    spec = action.trigger
    account_id = env.account_id
    secret = webhook.new_secret() if spec.source["type"] == "webhook" else None

    def effect(conn):
        agent_access(conn, account_id, action.agent_id, WRITER)
        owner = agents_q.agent_account(conn, action.agent_id)
        _check_source(conn, owner, spec.source)
        limit = app.config.trigger_max_per_agent
        if triggers_q.count_of_agent(conn, action.agent_id) >= limit:
            raise ProtocolError(409, f"agent {action.agent_id} has {limit} triggers, the most it may have "
                                     "(delete one first)")
        if triggers_q.name_taken(conn, action.agent_id, spec.name):
            raise ProtocolError(409, f"agent {action.agent_id} already has a trigger named {quote(spec.name)}")
        trigger_id = new_id()
        trigger = triggers_q.create_trigger(conn, trigger_id, owner, action.agent_id, spec.name, spec.enabled,
                                            spec.source, spec.prompt, spec.continuation, now,
                                            _first_due(spec.source, spec.enabled, now))
        if secret is not None:
            webhook.store_secret(conn, app.secrets, trigger_id, owner, secret, now)
        return {"_": "CreateAgentTriggerResponse", "trigger": triggers_q.public(trigger)}, [trigger]

    def job(conn):
        return once(conn, account_id, "CreateAgentTrigger", action.client_request_id,
                    request_fingerprint(env.action), now, effect)

    response, created = await app.db.write(job)
    for trigger in created:
        app.triggers.changed(trigger)
        app.notify_account(trigger["account"], "trigger-created", agent_id=trigger["agentId"])
    return response


async def update_agent_trigger(app, env, action) -> dict:
    now = app.triggers.now_ms()
    patch = action.patch
    secret = webhook.new_secret() if patch.source is not None and patch.source["type"] == "webhook" else None

    def job(conn):
        before, _role = trigger_for(conn, env.account_id, action.trigger_id, WRITER)
        if patch.source is not None:
            _check_source(conn, before["account"], patch.source)
        if patch.name is not None and triggers_q.name_taken(conn, before["agentId"], patch.name, but=before["id"]):
            raise ProtocolError(409, f"agent {before['agentId']} already has a trigger named {quote(patch.name)}")
        source = patch.source or before["source"]
        enabled = before["enabled"] if patch.enabled is None else patch.enabled
        # A new source, or a trigger turned back on, starts its schedule from now (what was
        # missed while it was off is not fired).
        retime = patch.source is not None or enabled != before["enabled"]
        trigger = triggers_q.update_trigger(conn, before["id"], now, name=patch.name, enabled=patch.enabled,
                                            source=patch.source, prompt=patch.prompt,
                                            continuation=patch.continuation,
                                            next_due_at=_first_due(source, enabled, now), retime=retime)
        if secret is not None and triggers_q.credentials(conn, before["id"]) is None:
            webhook.store_secret(conn, app.secrets, before["id"], before["account"], secret, now)
        return trigger

    trigger = await app.db.write(job)
    app.triggers.changed(trigger)
    app.notify_account(trigger["account"], "trigger-updated", agent_id=trigger["agentId"])
    return {"_": "UpdateAgentTriggerResponse", "trigger": triggers_q.public(trigger)}


async def delete_agent_trigger(app, env, action) -> dict:
    def job(conn):
        trigger, _role = trigger_for(conn, env.account_id, action.trigger_id, WRITER)
        triggers_q.delete_trigger(conn, trigger["id"])
        return trigger

    trigger = await app.db.write(job)
    app.triggers.changed(trigger)
    app.notify_account(trigger["account"], "trigger-deleted", agent_id=trigger["agentId"])
    return {"_": "DeleteAgentTriggerResponse", "triggerId": trigger["id"]}

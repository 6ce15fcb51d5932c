"""The agent's own triggers: `read ~/triggers/` (its triggers, with the write contract),
`read ~/triggers/<name>` (one, with its recent firings) and `write ~/triggers/<name>` (create or
change by name, `enabled` honoured as written; `options.delete` removes it). The same rows, checks
and bounds as the CreateAgentTrigger / UpdateAgentTrigger actions (server/triggers/manage.py, reached
through the `TriggerAdmin` port below, which server/triggers/service.Triggers fills; this module
never imports the triggers). The trigger is the owner's, as in
the reference (no consent step), and acts on this agent only: only the owner in person may name
another of the account's agents (server/tools/authority.py)."""
from __future__ import annotations

import json
from typing import Protocol

from seed_agents.protocol.api.actions_triggers import (
    TriggerInput,
    TriggerPatch,
    parse_continuation,
    parse_prompt,
    parse_source,
)
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.api.fields import MAX_NAME, Fields

from ..store import trigger_firings as firings_q
from ..store import triggers as triggers_q
from ..store.errors import Refused
from .context import ToolContext, ToolFailure, ToolResult

FIRINGS_SHOWN = 10


class TriggerAdmin(Protocol):
    """What the trigger tools need of the triggers (server/triggers/service.Triggers is the one):
    the actions' checks inside a write job, the trigger clock, a webhook secret, and a wake-up of
    the scheduler after a change commits."""

    def now_ms(self) -> int: ...
    def new_secret(self) -> str: ...
    def create(self, conn, owner: str, agent_id: str, spec, now: int, secret: str | None, *,  # noqa: ANN001
               others: bool = False, collaborator: bool = False) -> dict: ...
    def update(self, conn, before: dict, patch, now: int, secret: str | None, *,  # noqa: ANN001
               others: bool = False, collaborator: bool = False) -> dict: ...
    def changed(self, trigger: dict | None = None) -> None: ...

CONTRACT = """## Writing a trigger
`write ~/triggers/<name>` with `content` a JSON object:
- `source` (required for a new trigger): `{"type": "schedule", "schedule": {"kind": "interval", "every": 30, "unit": "minutes"}}`,
  `{"kind": "weekly", "daysOfWeek": [1,2,3,4,5], "timeOfDay": "09:00", "timezone": "Europe/Berlin"}`,
  `{"kind": "once", "runAt": <unix ms>}`, `{"kind": "cron", "expression": "30 9 * * 1-5", "timezone": "UTC"}`;
  or `{"type": "webhook"}`, `{"type": "run-completed", "agentId"?, "status"?, "titleMatch"?}`,
  `{"type": "document-comment", "resource": "hm://..."}`, `{"type": "user-mention", "mentionedAccounts": [...]}`,
  `{"type": "comment-reply", "parentAuthor": "<account>"}`, `{"type": "site-update", "resourcePrefix": "hm://..."}`,
  `{"type": "document-author-comment", "documentAuthor": "<account>"}` (others' comments on its documents),
  `{"type": "activity", "alternatives": [{"id": "...", "source": {...one of the above feed sources...}}]}`
- `prompt` (required for a new trigger): what the new session starts with
- `enabled` (default true), `continuation` (`{"kind": "newThread"}` by default, or `{"kind": "tool", "tool": "...", "input": {...}}`)
Writing an existing name changes only the fields given. `options: {"delete": true}` deletes it."""


def _name(name: str) -> str:
    name = name.strip().strip("/")
    if not name or len(name) > MAX_NAME or "/" in name:
        raise ToolFailure(f"a trigger is named by one path segment of 1 to {MAX_NAME} characters: ~/triggers/<name>")
    return name


def _shown(trigger: dict) -> dict:
    info = triggers_q.public(trigger)
    return {k: info[k] for k in ("id", "name", "enabled", "source", "prompt", "continuation", "lastFiredAt",
                                 "lastError") if k in info}


def read(ctx: ToolContext, name: str) -> ToolResult:
    agent_id = ctx.agent["id"]
    if not name.strip("/"):
        triggers = ctx.db.read(triggers_q.triggers_of_agent, agent_id, 1_000)
        lines = ["# ~/triggers", ""]
        lines += [f"- {t['name']} ({t['source']['type']}, {'enabled' if t['enabled'] else 'disabled'})" for t in triggers]
        lines += ["", CONTRACT]
        return ToolResult({"summary": f"{len(triggers)} triggers.", "markdown": "\n".join(lines),
                           "triggers": [_shown(t) for t in triggers]})
    name = _name(name)
    trigger = ctx.db.read(_by_name, agent_id, name)
    if trigger is None:
        raise ToolFailure(f"no trigger named {name!r}; read ~/triggers/ to list them")
    firings = ctx.db.read(firings_q.firings_of_trigger, trigger["id"], FIRINGS_SHOWN)
    return ToolResult({"summary": f"Trigger {name}.", "trigger": _shown(trigger),
                       "recentFirings": [{k: f[k] for k in ("status", "activityKey", "createdAt", "error", "sessionId")
                                          if k in f} for f in firings]})


_by_name = triggers_q.trigger_named


async def write(ctx: ToolContext, name: str, params: dict) -> ToolResult:
    name = _name(name)
    admin: TriggerAdmin | None = ctx.triggers
    if admin is None:
        raise ToolFailure("this server runs no triggers")
    agent_id, owner = ctx.agent["id"], ctx.agent["account"]
    options = params.get("options") if isinstance(params.get("options"), dict) else {}
    now = admin.now_ms()
    if options.get("delete") is True:
        def drop(conn):
            trigger = _by_name(conn, agent_id, name)
            if trigger is not None:
                triggers_q.delete_trigger(conn, trigger["id"])
            return trigger

        trigger = await ctx.db.write(drop)
        if trigger is None:
            raise ToolFailure(f"no trigger named {name!r} to delete")
        _announce(ctx, admin, trigger, "trigger-deleted")
        return ToolResult({"summary": f"Deleted trigger {name}.", "deleted": True})
    try:
        body = json.loads(params.get("content") or "")
    except ValueError:
        raise ToolFailure("content must be a JSON object describing the trigger\n\n" + CONTRACT) from None
    if not isinstance(body, dict):
        raise ToolFailure("content must be a JSON object describing the trigger\n\n" + CONTRACT)
    f = Fields(body, "trigger")
    secret = admin.new_secret()
    others = ctx.authority.owner_in_person   # the agent itself watches only its own runs
    collaborator = ctx.authority.in_person and not others

    def job(conn):
        before = _by_name(conn, agent_id, name)
        if before is None:
            enabled = body.get("enabled", True)
            if type(enabled) is not bool:
                raise ProtocolError(400, "trigger.enabled must be a boolean")
            spec = TriggerInput(name, enabled, parse_source(f), parse_prompt(f, required=True), parse_continuation(f))
            return admin.create(conn, owner, agent_id, spec, now, secret, others=others,
                                       collaborator=collaborator), "trigger-created"
        patch = TriggerPatch(None, body.get("enabled") if type(body.get("enabled")) is bool else None,
                             parse_source(f) if body.get("source") is not None else None,
                             parse_prompt(f, required=False), parse_continuation(f))
        return admin.update(conn, before, patch, now, secret, others=others,
                                       collaborator=collaborator), "trigger-updated"

    try:
        trigger, reason = await ctx.db.write(job)
    except (ProtocolError, Refused) as exc:
        raise ToolFailure(f"{exc.message}\n\n{CONTRACT}") from None
    _announce(ctx, admin, trigger, reason)
    verb = "Created" if reason == "trigger-created" else "Updated"
    return ToolResult({"summary": f"{verb} trigger {name}.", "trigger": _shown(trigger)})


def _announce(ctx: ToolContext, admin: TriggerAdmin, trigger: dict, reason: str) -> None:
    admin.changed(trigger)
    ctx.publisher.notify_account(trigger["account"], reason, agent_id=trigger["agentId"])

"""Triggers: List/Get/Create/Update/DeleteAgentTrigger (CONTRACT section 8).

Each action: its frozen dataclass, its parser (written with seed_agents.protocol.api.fields) and one line in
`ACTIONS`, which protocol/api/actions.py merges into the one table the server routes by.

The shapes are the reference's (`AgentTriggerInput`, `AgentTriggerPatch`, `AgentTriggerSource`,
`TriggerContinuation`), plus what this server adds (docs/protocol.md, "Triggers"): a `webhook`
source, a `comment-reply` activity source, a `cron` schedule and a `tool` continuation. Parsing
checks shapes and bounds only; whether a time zone or a cron expression exists is the server's
question (it needs the zone database), asked before anything is stored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..hm.blocks import BlockTreeError, check_tree
from ..wire.dagcbor import encode
from .fields import MAX_ID, MAX_MESSAGE_TEXT, MAX_NAME, ActionKind, Fields, id_action, kind_of, read, write

MAX_SOURCE_BYTES = 64 * 1024        # a source as DAG-CBOR
MAX_PAYLOAD_BYTES = 64 * 1024       # a wake continuation's payload, a tool continuation's input
MAX_RESOURCE = 2_000                # hm:// ids and prefixes
MAX_LIST = 100                      # accounts of a mention source, event types of a site source
MAX_INTERVAL = 10_000               # `every` of an interval schedule (minutes or hours)
MAX_CRON = 200                      # characters of a cron expression
RUN_END_STATUSES = ("succeeded", "failed", "canceled")
# The activity feed's filters, and `activity`: several of them as alternatives (any one matching
# fires it), as the storage design's AgentTriggerSource.
ACTIVITY_FILTERS = ("document-comment", "user-mention", "comment-reply", "document-author-comment", "site-update")
ACTIVITY_SOURCES = (*ACTIVITY_FILTERS, "activity")
SOURCE_TYPES = ("schedule", "webhook", "run-completed", *ACTIVITY_SOURCES)
MAX_ALTERNATIVES = 16
_TIME_OF_DAY = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]")


@dataclass(frozen=True, slots=True)
class TriggerInput:
    name: str
    enabled: bool
    source: dict
    prompt: object            # text, or a block tree
    continuation: dict | None


@dataclass(frozen=True, slots=True)
class TriggerPatch:
    name: str | None = None
    enabled: bool | None = None
    source: dict | None = None
    prompt: object | None = None
    continuation: dict | None = None


@dataclass(frozen=True, slots=True)
class ListAgentTriggers:
    ts: int
    agent_id: str


@dataclass(frozen=True, slots=True)
class GetAgentTrigger:
    ts: int
    trigger_id: str


@dataclass(frozen=True, slots=True)
class CreateAgentTrigger:
    ts: int
    agent_id: str
    trigger: TriggerInput
    client_request_id: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateAgentTrigger:
    ts: int
    trigger_id: str
    patch: TriggerPatch


@dataclass(frozen=True, slots=True)
class DeleteAgentTrigger:
    ts: int
    trigger_id: str


@dataclass(frozen=True, slots=True)
class FireAgentTrigger:
    """This server's extension: fire a trigger now, by hand (to try a schedule's prompt)."""
    ts: int
    trigger_id: str
    client_request_id: str | None = None


MERGE_ACTIONS = ("survivor", "retired")


@dataclass(frozen=True, slots=True)
class MergeAgentTriggers:
    """This server's extension (the storage design's `merged_into`): combine two activity
    triggers of one agent. The survivor (`triggerId`) takes both conditions as `activity`
    alternatives and the chosen one's action (prompt and continuation: `action` "survivor", the
    default, or "retired"); the other (`retiredId`) is disabled, marked `mergedInto`, keeps its
    firings and cannot be changed again. One transaction."""
    ts: int
    trigger_id: str
    retired_id: str
    action: str = "survivor"


# -- the parts ---------------------------------------------------------------------------------
def _boolean(f: Fields, field: str) -> bool | None:
    value = f.get(field, False)
    if value is not None and type(value) is not bool:
        raise f.fail(field, f"must be a boolean, got {kind_of(value)}")
    return value


def _one_of(f: Fields, field: str, choices, *, required: bool = True) -> str | None:
    value = f.get(field, required)
    if value is None:
        return None
    if value not in choices:
        raise f.fail(field, f"must be one of {', '.join(choices)}")
    return value


def _texts(f: Fields, field: str, limit: int, *, required: bool) -> list[str] | None:
    value = f.get(field, required)
    if value is None:
        return None
    if type(value) is not list:
        raise f.fail(field, f"must be an array of text, got {kind_of(value)}")
    if len(value) > MAX_LIST:
        raise f.fail(field, f"must have at most {MAX_LIST} entries, got {len(value)}")
    out = []
    for i, item in enumerate(value):
        out.append(Fields({"v": item}, f"{f.name}.{field}[{i}]").text("v", limit))
    return out


def _bounded(f: Fields, field: str, value: object, limit: int) -> None:
    size = len(encode(value))
    if size > limit:
        raise f.fail(field, f"must be at most {limit} bytes as DAG-CBOR, got {size}")


def parse_schedule(f: Fields) -> dict:
    """AgentScheduleTrigger, normalized to the fields it kind has."""
    kind = _one_of(f, "kind", ("interval", "weekly", "once", "cron"))
    out: dict = {"kind": kind}
    if kind == "interval":
        out["every"] = f.integer("every", 1, MAX_INTERVAL, required=True)
        out["unit"] = _one_of(f, "unit", ("minutes", "hours"))
    elif kind == "weekly":
        days = f.get("daysOfWeek", True)
        if type(days) is not list or not days:
            raise f.fail("daysOfWeek", "must be a non-empty array of days (0 = Sunday .. 6 = Saturday)")
        for day in days:
            if type(day) is not int or not 0 <= day <= 6:
                raise f.fail("daysOfWeek", "must hold days 0 (Sunday) to 6 (Saturday)")
        out["daysOfWeek"] = sorted(set(days))
        time_of_day = f.text("timeOfDay", 5)
        if not _TIME_OF_DAY.fullmatch(time_of_day):
            raise f.fail("timeOfDay", "must be HH:MM on a 24-hour clock (e.g. 09:30)")
        out["timeOfDay"] = time_of_day
        out["timezone"] = f.text("timezone", MAX_NAME)
    elif kind == "once":
        out["runAt"] = f.integer("runAt", 0, None, required=True)
        timezone = f.text("timezone", MAX_NAME, required=False)
        if timezone is not None:
            out["timezone"] = timezone
    else:
        out["expression"] = f.text("expression", MAX_CRON).strip()
        timezone = f.text("timezone", MAX_NAME, required=False)
        if timezone is not None:
            out["timezone"] = timezone
    return out


def parse_source(f: Fields, field: str = "source") -> dict:
    """AgentTriggerSource, normalized: only the fields its type has."""
    raw = f.mapping(field)
    _bounded(f, field, raw, MAX_SOURCE_BYTES)
    s = Fields(raw, f"{f.name}.{field}")
    kind = _one_of(s, "type", SOURCE_TYPES)
    out: dict = {"type": kind}

    def optional_text(name: str, limit: int) -> None:
        value = s.text(name, limit, required=False)
        if value is not None:
            out[name] = value.strip()

    if kind == "schedule":
        out["schedule"] = parse_schedule(Fields(s.mapping("schedule"), f"{s.name}.schedule"))
    elif kind == "run-completed":
        optional_text("agentId", MAX_ID)
        status = _one_of(s, "status", RUN_END_STATUSES, required=False)
        if status is not None:
            out["status"] = status
        optional_text("titleMatch", MAX_NAME)
    elif kind == "document-comment":
        out["resource"] = s.text("resource", MAX_RESOURCE).strip()
        optional_text("author", MAX_RESOURCE)
    elif kind == "user-mention":
        accounts = _texts(s, "mentionedAccounts", MAX_RESOURCE, required=False)
        if accounts is None:   # the reference's legacy single account
            legacy = s.text("mentionedAccount", MAX_RESOURCE, required=False)
            accounts = [legacy] if legacy else []
        if not accounts:
            raise s.fail("mentionedAccounts", "must name at least one account")
        out["mentionedAccounts"] = [a.strip() for a in accounts]
        optional_text("resourcePrefix", MAX_RESOURCE)
    elif kind == "comment-reply":
        optional_text("parentAuthor", MAX_RESOURCE)
        optional_text("resource", MAX_RESOURCE)
        if "parentAuthor" not in out and "resource" not in out:
            raise s.fail("parentAuthor", "or resource is required (a rule matching every reply is "
                                         "never what someone meant)")
    elif kind == "site-update":
        out["resourcePrefix"] = s.text("resourcePrefix", MAX_RESOURCE).strip()
        types = _texts(s, "eventTypes", MAX_NAME, required=False)
        if types:
            out["eventTypes"] = types
    elif kind == "document-author-comment":
        # A comment by someone else on a document in this account (the documents it wrote).
        out["documentAuthor"] = s.text("documentAuthor", MAX_RESOURCE).strip().removeprefix("hm://").strip("/")
        if not out["documentAuthor"]:
            raise s.fail("documentAuthor", "must name an account")
        optional_text("resourcePrefix", MAX_RESOURCE)
    elif kind == "activity":
        out["alternatives"] = _alternatives(s)
    return out


def _alternatives(s: Fields) -> list[dict]:
    """An activity source's `alternatives`: 1..MAX_ALTERNATIVES `{id, source}`, ids unique, each
    source one of the activity filters (no schedules, webhooks, runs, nor nested alternatives)."""
    raw = s.get("alternatives", True)
    if type(raw) is not list or not raw:
        raise s.fail("alternatives", "must be a non-empty array of {id, source}")
    if len(raw) > MAX_ALTERNATIVES:
        raise s.fail("alternatives", f"holds at most {MAX_ALTERNATIVES} alternatives")
    out, seen = [], set()
    for i, item in enumerate(raw):
        if type(item) is not dict:
            raise s.fail(f"alternatives[{i}]", f"must be an object {{id, source}}, got {kind_of(item)}")
        a = Fields(item, f"{s.name}.alternatives[{i}]")
        alt_id = a.text("id", MAX_NAME).strip()
        if not alt_id or alt_id in seen:
            raise a.fail("id", "must be a non-empty id, unique among the alternatives")
        seen.add(alt_id)
        source = parse_source(a)
        if source["type"] not in ACTIVITY_FILTERS:
            raise a.fail("source.type", f"must be one of the activity filters ({', '.join(ACTIVITY_FILTERS)}), "
                                        f"got {source['type']!r}")
        out.append({"id": alt_id, "source": source})
    return out


def parse_prompt(f: Fields, *, required: bool) -> object | None:
    value = f.get("prompt", required)
    if value is None:
        return None
    if type(value) is str:
        return f.text("prompt", MAX_MESSAGE_TEXT, allow_empty=True)
    if type(value) is not list:
        raise f.fail("prompt", f"must be text or an array of blocks, got {kind_of(value)}")
    try:
        tree = check_tree(value)
    except BlockTreeError as exc:
        raise f.fail("prompt" + exc.path, exc.problem) from None
    _bounded(f, "prompt", tree, MAX_MESSAGE_TEXT)
    return tree


CONTINUATION_KINDS = ("newThread", "wake", "tool")


def parse_continuation(f: Fields) -> dict | None:
    raw = f.mapping("continuation", required=False)
    if raw is None:
        return None
    c = Fields(raw, f"{f.name}.continuation")
    kind = _one_of(c, "kind", CONTINUATION_KINDS)
    out: dict = {"kind": kind}
    if kind == "wake":
        out["signal"] = c.text("signal", MAX_NAME)
        run_id = c.text("runId", MAX_ID, required=False)
        if run_id is not None:
            out["runId"] = run_id
        if raw.get("payload") is not None:
            _bounded(c, "payload", raw["payload"], MAX_PAYLOAD_BYTES)
            out["payload"] = raw["payload"]
    elif kind == "tool":
        out["tool"] = c.text("tool", MAX_NAME)
        tool_input = c.mapping("input", required=False)
        if tool_input is not None:
            _bounded(c, "input", tool_input, MAX_PAYLOAD_BYTES)
            out["input"] = tool_input
    return out


def _trigger_input(f: Fields) -> TriggerInput:
    t = Fields(f.mapping("trigger"), f"{f.name}.trigger")
    enabled = _boolean(t, "enabled")
    return TriggerInput(t.text("name", MAX_NAME).strip(), True if enabled is None else enabled,
                        parse_source(t), parse_prompt(t, required=True), parse_continuation(t))


def _trigger_patch(f: Fields) -> TriggerPatch:
    raw = f.mapping("patch")
    p = Fields(raw, f"{f.name}.patch")
    name = p.text("name", MAX_NAME, required=False)
    return TriggerPatch(
        None if name is None else name.strip(),
        _boolean(p, "enabled"),
        parse_source(p) if raw.get("source") is not None else None,
        parse_prompt(p, required=False),
        parse_continuation(p))


def _create(f: Fields, ts: int) -> CreateAgentTrigger:
    return CreateAgentTrigger(ts, f.text("agentId", MAX_ID), _trigger_input(f),
                              f.text("clientRequestId", MAX_ID, required=False))


def _fire(f: Fields, ts: int) -> FireAgentTrigger:
    return FireAgentTrigger(ts, f.text("triggerId", MAX_ID), f.text("clientRequestId", MAX_ID, required=False))


def _merge(f: Fields, ts: int) -> MergeAgentTriggers:
    trigger_id, retired_id = f.text("triggerId", MAX_ID), f.text("retiredId", MAX_ID)
    if trigger_id == retired_id:
        raise f.fail("retiredId", "must be another trigger than triggerId")
    return MergeAgentTriggers(ts, trigger_id, retired_id, _one_of(f, "action", MERGE_ACTIONS, required=False)
                              or "survivor")


def _update(f: Fields, ts: int) -> UpdateAgentTrigger:
    return UpdateAgentTrigger(ts, f.text("triggerId", MAX_ID), _trigger_patch(f))


ACTIONS: dict[str, ActionKind] = {
    "ListAgentTriggers": read(id_action(ListAgentTriggers, "agentId")),
    "GetAgentTrigger": read(id_action(GetAgentTrigger, "triggerId")),
    "CreateAgentTrigger": write(_create),
    "UpdateAgentTrigger": write(_update),
    "DeleteAgentTrigger": write(id_action(DeleteAgentTrigger, "triggerId")),
    "FireAgentTrigger": write(_fire),
    "MergeAgentTriggers": write(_merge),
}

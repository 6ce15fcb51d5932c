"""One reference row into this server's row, checked by our own rules.

The checks are the ones a client's action meets here (the action parsers of protocol/), so a
reference row the desktop could not have sent to this server is reported and skipped (`Skip`),
never stored half-valid. What the reference stores in another shape is reshaped here: a signing
identity is a secret there and a row of its own here; a trigger's prompt is JSON text there; a
run's error is a map there and two columns here.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from seed_agents.protocol.hm import hm_activity
from seed_agents.protocol.wire import cids, dagcbor
from seed_agents.protocol.api.actions import parse_action, request_fingerprint
from seed_agents.protocol.wire.errors import ProtocolError
from seed_agents.protocol.wire.keys import Keypair
from seed_agents.protocol.agent.tool_documents import lambda_document

from ..store.errors import Refused
from .reference import ReferenceError, decode_cbor, row_name


class Skip(Exception):
    """This row is not brought over; the message says why, in one sentence."""


def _parse(action: dict) -> Any:
    try:
        return parse_action({**action, "ts": 0})
    except (ProtocolError, Refused) as exc:
        raise Skip(f"breaks this server's rules: {exc.message}") from None


def cbor(row: dict, table: str, column: str, *, optional: bool = False) -> object:
    value = row[column]
    if value is None:
        if optional:
            return None
        raise ReferenceError(f"{row_name(table, row)}: {column} is empty")
    return decode_cbor(value, table, row, column)[0]


def enc(value: object) -> bytes | None:
    return None if value is None else dagcbor.encode(value)


def provider_config(row: dict) -> dict:
    config = cbor(row, "model_providers", "config_cbor")
    if not isinstance(config, dict):
        raise Skip("its config is not a map")
    return _parse({"_": "SetModelProvider", "name": row["name"], "provider": config}).provider


IDENTITY_KIND = "hm-account-key"


def identity_of(metadata: object) -> bool:
    return isinstance(metadata, dict) and metadata.get("kind") == IDENTITY_KIND


def identity(row: dict, seed: bytes, metadata: dict) -> tuple[str, str, str | None, str | None]:
    """(name, identity_id, label, server_url) of a signing identity kept as a reference secret."""
    label = metadata.get("label") if isinstance(metadata.get("label"), str) else None
    action = {"_": "ImportSigningIdentity", "seed": seed}
    if label:
        action["label"] = label
    parsed = _parse(action)
    identity_id = Keypair.from_seed(parsed.seed).account_id
    name = f"hm-account-{identity_id[:16]}"
    if row["name"] != name:
        raise Skip(f"its name {row['name']!r} does not match its key ({name})")
    server_url = metadata.get("serverUrl") if isinstance(metadata.get("serverUrl"), str) else None
    return name, identity_id, parsed.label, server_url or None


def definition(row: dict) -> dict:
    value = cbor(row, "agents", "definition_cbor")
    if not isinstance(value, dict):
        raise Skip("its definition is not a map")
    return _parse({"_": "CreateAgent", "definition": value}).definition


def trigger_prompt(raw: object) -> object:
    """The reference keeps a block prompt as JSON text {type: 'seed-prompt-blocks', blocks}; the
    desktop sends (and reads back) the blocks."""
    if isinstance(raw, str) and raw.startswith('{"type":"seed-prompt-blocks"'):
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, dict) and isinstance(value.get("blocks"), list):
            return value["blocks"]
    return raw


def trigger(row: dict) -> tuple[str, dict, object, dict | None, bool]:
    """(name, source, prompt, continuation, enabled), parsed as CreateAgentTrigger."""
    source = cbor(row, "agent_triggers", "source_cbor")
    continuation = cbor(row, "agent_triggers", "continuation_cbor", optional=True)
    spec = {"name": row["name"], "enabled": bool(row["enabled"]), "source": source,
            "prompt": trigger_prompt(row["prompt"])}
    if continuation is not None:
        spec["continuation"] = continuation
    parsed = _parse({"_": "CreateAgentTrigger", "agentId": row["agent_id"], "trigger": spec}).trigger
    return parsed.name, parsed.source, parsed.prompt, parsed.continuation, parsed.enabled


def tool_document(row: dict) -> bytes:
    """The document's bytes, as stored, once its CID and its checks hold."""
    doc, canonical = decode_cbor(row["doc_cbor"], "tool_documents", row, "doc_cbor")
    data = bytes(row["doc_cbor"]) if canonical else dagcbor.encode(doc)
    if not isinstance(doc, dict):
        raise Skip("its document is not a map")
    if cids.cid_text(cids.cid_bytes(data)) != row["cid"]:
        raise Skip(f"its CID {row['cid']!r} is not the CID of its document")
    if row["kind"] == "lambda":
        try:
            checked = lambda_document(doc, "tool document")
        except (ProtocolError, Refused) as exc:
            raise Skip(f"breaks this server's rules: {exc.message}") from None
        if checked.get("name") != row["name"]:
            raise Skip("its name differs from its document's")
    return data


SESSION_STATUSES = ("idle", "streaming", "stopped", "error")
TITLE_SOURCES = ("system", "agent", "user")


def session(row: dict) -> tuple:
    if row["status"] not in SESSION_STATUSES:
        raise Skip(f"its status {row['status']!r} is not one of {', '.join(SESSION_STATUSES)}")
    plan = cbor(row, "sessions", "plan_cbor", optional=True)
    override = cbor(row, "sessions", "model_override_cbor", optional=True)
    title_source = row["title_source"] if row["title_source"] in TITLE_SOURCES else "system"
    return (row["id"], row["account_id"], row["agent_id"], row["title"], title_source, row["status"],
            row["parent_session_id"], row["run_id"], enc(plan), enc(override), row["description"],
            row["created_at"], row["updated_at"])


RUN_STATUSES = ("queued", "claimed", "running", "waiting", "succeeded", "failed", "canceled")
# Ours has no `trigger` or `workflow` origin: a trigger's run is the system's, a script's child the agent's.
ORIGINS = {"user": "user", "agent": "agent", "system": "system", "trigger": "system", "workflow": "agent"}


def run(row: dict) -> dict:
    """Our runs row (column → value) of a reference run."""
    if row["kind"] not in ("agent", "workflow"):
        raise Skip(f"a {row['kind']!r} run: this server runs agent turns and workflows only")
    if row["kind"] == "workflow" and not (isinstance(row["source_text"], str) and row["source_text"]):
        raise Skip("a workflow run without its script")
    if row["agent_id"] is None:
        raise Skip("it names no agent")
    if row["status"] not in RUN_STATUSES:
        raise Skip(f"its status {row['status']!r} is not a run status here")
    origin = ORIGINS.get(row["origin"])
    if origin is None:
        raise Skip(f"its origin {row['origin']!r} has no counterpart here")
    table = "runs"
    given = cbor(row, table, "input_cbor", optional=True)
    output = cbor(row, table, "output_cbor", optional=True)
    error = cbor(row, table, "error_cbor", optional=True)
    wait = cbor(row, table, "wait_cbor", optional=True)
    out: dict = {
        "id": row["id"], "account_id": row["account_id"], "agent_id": row["agent_id"],
        "session_id": row["session_id"], "status": row["status"], "attempt": row["attempt"] or 0,
        "created_at": row["created_at"], "updated_at": row["updated_at"], "root_run_id": row["root_run_id"],
        "parent_run_id": row["parent_run_id"], "depth": row["depth"] or 0, "kind": "agent", "origin": origin,
        "title": row["title"] or "", "started_at": row["started_at"], "finished_at": row["finished_at"],
        "parent_tool_call_id": row["parent_tool_call_id"],
        # A workflow keeps its script (the `kind` column stays `agent`: a run with a source is a workflow).
        "source_text": row["source_text"] if row["kind"] == "workflow" else None,
        "continued_from_run_id": row["continued_from_run_id"],
        "usage": enc(cbor(row, table, "usage_cbor", optional=True)),
        "budget": enc(cbor(row, table, "budget_cbor", optional=True)),
        "plan": enc(cbor(row, table, "plan_cbor", optional=True)),
        "wait": enc(wait) if row["status"] == "waiting" else None,
        "wake_at": row["not_before"] if row["status"] == "waiting" else None,
    }
    if isinstance(given, dict):
        ids = given.get("userEventIds")
        if isinstance(ids, list) and ids and isinstance(ids[0], str):
            out["user_event_id"] = ids[0]
        spec = given.get("spec")
        if isinstance(spec, dict):   # a delegated child's brief, as ours keeps it
            child = {k: spec[k] for k in ("title", "output") if k in spec}
            if isinstance(spec.get("input"), str):
                child["brief"] = spec["input"]
            out["input"] = enc(child)
    if isinstance(output, dict):
        obligations = output.pop("unmetObligations", None)
        if isinstance(obligations, list):
            out["unmet_obligations"] = enc(obligations)
        out["output"] = enc(output)
    if isinstance(error, dict):
        out["error"] = str(error.get("message") or "")[:4096] or None
        out["error_code"] = str(error.get("code"))[:200] if error.get("code") is not None else None
        detail = {k: error[k] for k in ("stack", "tool", "callSeq") if k in error}
        if detail:
            out["error_detail"] = enc(detail)
    return out


FIRING_STATUSES = ("created", "skipped", "error")


def firing(row: dict) -> tuple:
    status, error = row["status"], row["error"]
    if status not in FIRING_STATUSES:   # the reference's 'no-listener' and others: recorded as skipped
        status, error = "skipped", error or f"the reference recorded it as {row['status']!r}"
    activity = cbor(row, "trigger_firings", "activity_cbor", optional=True)
    return (row["id"], row["account_id"], row["agent_id"], row["trigger_id"], row["activity_key"], status,
            row["session_id"], enc(activity), error, row["created_at"], firing_summary(activity))


def firing_summary(activity: object) -> str | None:
    """The one line a firing is listed with, as the reference words it (activity-triggers.ts)."""
    if not isinstance(activity, dict):
        return None
    kind = activity.get("type")
    if kind == "run-completed":
        title, status = activity.get("runTitle"), activity.get("runStatus")
        return f"{title if isinstance(title, str) and title else 'A run'} " \
               f"{status if isinstance(status, str) and status else 'finished'}"
    if kind == "schedule":
        at, what = activity.get("scheduledAt"), activity.get("scheduleKind")
        if type(at) is int:
            when = datetime.fromtimestamp(at / 1000, timezone.utc).isoformat(timespec="milliseconds")
            return f"Scheduled {what if isinstance(what, str) and what else 'schedule'} at {when.replace('+00:00', 'Z')}"
        return "Scheduled run"
    return hm_activity.summary(activity)


# The reference's remembered actions (api-service.ts: #withIdempotency and #messageSession) and
# the field of each that carries the client's id. It keeps a part of the request (MessageSession:
# {sessionId, content}; CreateSession: {agentId, title}; ...): that part, the action's name and the
# id are the whole action the desktop sends (models.ts), so our fingerprint of a retry, which is
# taken over the action without `ts`, is the fingerprint of that action.
IDEMPOTENT_ACTIONS = {"CreateAgent": "clientRequestId", "CreateSigningIdentity": "clientRequestId",
                      "CreateAgentTrigger": "clientRequestId", "CreateSession": "clientRequestId",
                      "MessageSession": "clientMessageId"}


def idempotency(row: dict) -> tuple[bytes, bytes, dict, dict]:
    """(fingerprint, response bytes, the action, the response) of a remembered answer: the
    fingerprint is ours (protocol/api/actions.request_fingerprint) of the action the desktop
    sent, rebuilt from what the reference kept and checked by its parser here."""
    name = row["action"]
    if name == "ImportSigningIdentity":
        raise Skip("the reference keeps this request without its seed, so a retry could not be matched to it")
    field = IDEMPOTENT_ACTIONS.get(name)
    if field is None:
        raise Skip(f"the action {name!r} is not one whose answer this server remembers")
    request = cbor(row, "action_idempotency", "request_cbor")
    response = cbor(row, "action_idempotency", "response_cbor")
    if not isinstance(request, dict) or "_" in request or field in request or "ts" in request:
        raise Skip("its request is not the map of an action's fields")
    if not isinstance(response, dict) or response.get("_") != name + "Response":
        raise Skip(f"its response is not a {name}Response")
    action = {**request, "_": name, field: row["client_request_id"]}
    _parse(action)
    return request_fingerprint(action), dagcbor.encode(response), action, response


DRAFT_STATUSES = ("idle", "published", "deleted")


def draft(row: dict) -> tuple:
    """(id, account_id, agent_id, title, content_format, content, metadata, edit_target,
    location_target, path_name, visibility, status, created_at, updated_at, published_at,
    published_id, published_version); the reference's signer_secret_name has no column here (a
    draft is published as the agent's identity)."""
    if row["status"] not in DRAFT_STATUSES:
        raise Skip(f"its status {row['status']!r} is not a draft status here")
    if not isinstance(row["content_format"], str):
        raise Skip("it has no content format")
    content = cbor(row, "agent_drafts", "content_cbor")
    metadata = cbor(row, "agent_drafts", "metadata_cbor", optional=True)
    return (row["id"], row["account_id"], row["agent_id"], row["title"], row["content_format"], enc(content),
            enc(metadata), row["edit_target"], row["location_target"], row["path_name"], row["visibility"],
            row["status"], row["created_at"], row["updated_at"], row["published_at"], row["published_id"],
            row["published_version"])

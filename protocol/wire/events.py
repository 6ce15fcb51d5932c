"""Builders for the event and error maps of CONTRACT sections 2 and 5.

Plain dicts, the same for both framings: v1 sends them as JSON text, v2 as DAG-CBOR. Optional
fields are omitted, never null.
"""

from __future__ import annotations


def append(key: str, event: dict) -> dict:
    """A durable SessionEvent on `sessions/<id>`."""
    return {"_": "append", "key": key, "event": event}


def journal_append(key: str, entry: dict) -> dict:
    """A run journal entry on `runs/<rootRunId>` (RunJournalEntryInfo spread into the event, as
    the reference sends it: {_, key, runId, seq, entry, createdAt})."""
    return {"_": "append", "key": key, "runId": entry["runId"], "seq": entry["seq"], "entry": entry["entry"],
            "createdAt": entry["createdAt"]}


def append_partial(key: str, partial_id: str, patch: dict) -> dict:
    """A live-only streaming piece: patch is {textDelta?, done?, usage?}; never stored."""
    return {"_": "appendPartial", "key": key, "partialId": partial_id, "patch": patch}


def change(key: str, value: dict) -> dict:
    """The new state of what `key` names (SessionInfo, AgentInfo, RunInfo or an account notice)."""
    return {"_": "change", "key": key, "value": value}


def replayed(key: str, seq: int, head: dict | None = None) -> dict:
    """v2: replay is over; `seq` is the last seq sent, or the afterSeq when none was; `head`, the
    session's signed head at that seq (docs/protocol.md, "Verifiable history"), when there is one."""
    value = {"_": "replayed", "key": key, "seq": seq}
    if head is not None:
        value["head"] = head
    return value


def subscribed(key: str, account_id: str) -> dict:
    """v1 answer to Subscribe."""
    return {"_": "subscribed", "key": key, "accountId": account_id}


def error_event(message: str, status: int | None = None) -> dict:
    """A failure on a subscription (v1 `{_: "error", message, status?}`)."""
    event: dict = {"_": "error", "message": message}
    if status is not None:
        event["status"] = status
    return event


def error_response(status: int, message: str) -> dict:
    """The response value of any failed action."""
    return {"_": "Error", "status": status, "message": message}

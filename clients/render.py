"""How the CLI shows things to a person: one readable line per durable session event."""
from __future__ import annotations

import json


def _text_of(payload: dict) -> tuple[str, str]:
    kind = payload.get("type")
    if kind == "message":
        return str(payload.get("role", "?")), str(payload.get("content", ""))
    if kind == "error":
        return "error", str(payload.get("message", ""))
    rest = {k: v for k, v in payload.items() if k != "type"}
    return str(kind or "event"), json.dumps(rest, default=repr, ensure_ascii=False, sort_keys=True)


def event_line(event: dict) -> str:
    """`#12 user: hello`; continuation lines of a multi-line text are indented under it."""
    payload = event.get("event") if isinstance(event.get("event"), dict) else {}
    who, text = _text_of(payload)
    head = f"#{event.get('seq', '?')} {who}: "
    return head + text.replace("\n", "\n" + " " * len(head))


def agent_line(agent: dict) -> str:
    definition = agent.get("definition") or {}
    return (f"{agent.get('id')}  {definition.get('name', '')!s:<20}  {agent.get('status', '')!s:<8}  "
            f"{definition.get('modelProvider', '')}/{definition.get('model', '')}")


def session_line(session: dict) -> str:
    return (f"{session.get('id')}  agent {session.get('agentId')}  {session.get('status', '')!s:<9}  "
            f"{session.get('title', '')}")

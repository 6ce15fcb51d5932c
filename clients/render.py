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


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell under a header row; the last column unpadded."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = []
    for cells in [headers] + rows:
        padded = [c.ljust(w) for c, w in zip(cells[:-1], widths[:-1])] + [cells[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def as_json(value) -> str:
    """A listing for scripts (`--json`): the server's values as they came."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=repr)


def when(ms: int | None) -> str:
    """A time in ms since the epoch as local `YYYY-MM-DD HH:MM:SS` ('' when unknown)."""
    import time

    if not ms:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))

"""How the CLI shows things to a person: one renderer for `chat`, `send`, `tail` and `history`.

A session's events become lines a person reads: messages by who wrote them (`user`, `assistant`,
`server` for the turns the server injects, `error`), each tool call as one compact line with what
it did, what came back and how long it took (`· write ~/memory/notes.md → 27 bytes (117 ms)`),
children as they start and end (`↳`), and the plan as a checklist whenever it changes. `tail`
and `history` number each line with its event's seq (`#12 user: hello`); `chat` and `send` show
the assistant's words as they are, since the person watches them stream.
"""
from __future__ import annotations

import json

DETAIL_CHARS = 60      # of a call's argument shown on its line
SUMMARY_CHARS = 80     # of a result's summary
OTHER_CHARS = 200      # of an event of a kind this renderer does not know
PLAN_MARKS = {"done": "[x]", "running": "[>]", "failed": "[!]", "skipped": "[-]"}
DETAIL_KEYS = ("address", "path", "url", "query", "title", "name", "tool", "brief", "signal")


def one_line(text: object, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def duration(ms: object) -> str:
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def call_detail(name: str, params: object) -> str:
    """The argument that says what a call is about: `call search "cats"`, `write ~/memory/x`."""
    if not isinstance(params, dict):
        return ""
    if name == "call" and isinstance(params.get("tool"), str):
        inner = call_detail(params["tool"], params.get("input"))
        return one_line(params["tool"] + (" " + inner if inner else ""), DETAIL_CHARS)
    for key in DETAIL_KEYS:
        value = params.get(key)
        if isinstance(value, str) and value.strip():
            text = one_line(value, DETAIL_CHARS)
            return f'"{text}"' if key in ("query", "title", "brief") else text
    return ""


def result_summary(payload: dict) -> str:
    """What came back, in a few words: an error, a size, a count, or the tool's own summary."""
    if "error" in payload:
        return "error: " + one_line(payload.get("error"), SUMMARY_CHARS)
    output = payload.get("output")
    if isinstance(output, dict):
        if output.get("truncated") is True and "note" in output:
            return one_line(output.get("note"), SUMMARY_CHARS)
        if isinstance(output.get("size"), int) and not isinstance(output.get("size"), bool):
            return f"{output['size']} bytes"
        for key in ("entries", "results", "items"):
            if isinstance(output.get(key), list):
                return f"{len(output[key])} {key}"
        if isinstance(output.get("summary"), str):
            return one_line(output["summary"].rstrip("."), SUMMARY_CHARS)
        if isinstance(output.get("status"), str):
            return output["status"]
        return "done"
    if isinstance(output, str) and output.strip():
        return one_line(output.strip().splitlines()[0], SUMMARY_CHARS)
    return "done"


def plan_lines(plan: dict) -> list[str]:
    steps = [s for s in plan.get("steps") or [] if isinstance(s, dict)]
    return [f"  {PLAN_MARKS.get(s.get('status'), '[ ]')} {one_line(s.get('label', ''), 200)}" for s in steps]


def _payload(event: dict) -> dict:
    payload = event.get("event")
    return payload if isinstance(payload, dict) else {}


def who(payload: dict) -> str:
    """Who wrote a message: the server's injected turns are `server`, never the user's."""
    if payload.get("role") == "user":
        actor = payload.get("actor")
        return {"system": "server", "agent": "agent", "trigger": "trigger"}.get(actor, "user")
    return str(payload.get("role", "?"))


def is_stopped(payload: dict) -> bool:
    meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
    return bool(meta.get("stopped")) or (payload.get("content") == "Stopped." and set(meta) == {"runId"})


def attachment_note(payload: dict) -> str:
    files = [a for a in payload.get("attachments") or [] if isinstance(a, dict)]
    if not files:
        return ""
    shown = ", ".join(f"{a.get('name', a.get('id', '?'))} ({a.get('size', '?')} bytes)" for a in files)
    return f" [attached: {shown}]"


class Renderer:
    """Turns durable session events into lines, remembering what a line needs from earlier events
    (a result's call, a child's title, the plan last shown). `numbered`: each line starts with
    its event's `#seq` (tail, history); else assistant words are shown bare (chat, send)."""

    def __init__(self, numbered: bool = True) -> None:
        self.numbered = numbered
        self.calls: dict[str, dict] = {}       # toolCallId -> the tool_call payload
        self.children: dict[str, str] = {}     # toolCallId -> the child's title
        self.plan: object = None               # the checklist last shown

    def lines(self, event: dict) -> list[str]:
        payload = _payload(event)
        head = f"#{event.get('seq', '?')} " if self.numbered else ""
        kind = payload.get("type")
        if kind == "message":
            return self._message(head, payload)
        if kind == "error":
            return [f"{head}error: {payload.get('message', '')}"]
        if kind == "tool_call":
            self.calls[str(payload.get("id"))] = payload
            return []
        if kind == "tool_spawn":
            title = str(payload.get("title", ""))
            self.children[str(payload.get("toolCallId"))] = title
            return [f'{head}↳ child "{one_line(title, DETAIL_CHARS)}" started']
        if kind == "tool_result":
            return self._result(head, payload)
        rest = {k: v for k, v in payload.items() if k not in ("type", "meta")}
        return [f"{head}{kind or 'event'}: "
                + one_line(json.dumps(rest, default=repr, ensure_ascii=False, sort_keys=True), OTHER_CHARS)]

    def _message(self, head: str, payload: dict) -> list[str]:
        author = who(payload)
        text = str(payload.get("content", ""))
        if payload.get("role") == "assistant" and is_stopped(payload):
            text = "[stopped]" if text == "Stopped." else text + " [stopped]"
        text += attachment_note(payload)
        prefix = head + f"{author}: " if self.numbered or author != "assistant" else ""
        return [prefix + text.replace("\n", "\n" + " " * len(prefix))]

    def _result(self, head: str, payload: dict) -> list[str]:
        call_id = str(payload.get("toolCallId"))
        call = self.calls.pop(call_id, None) or {}
        name = str(payload.get("name") or call.get("name") or "tool")
        meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else {}
        took = duration(meta.get("durationMs"))
        took = f" ({took})" if took else ""
        if call_id in self.children or name == "delegate" and "error" not in payload:
            title = self.children.pop(call_id, None) or str((call.get("input") or {}).get("title", ""))
            return [f'{head}↳ child "{one_line(title, DETAIL_CHARS)}" {result_summary(payload)}{took}']
        detail = call_detail(name, call.get("input"))
        summary = result_summary(payload)
        output = payload.get("output")
        if name == "continue_session" and isinstance(output, dict) and isinstance(output.get("sessionId"), str):
            summary = f"continues in session {output['sessionId']}"   # (the model's own summary is for it)
        line = f"{head}· {name}{' ' + detail if detail else ''} → {summary}{took}"
        out = [line]
        plan = call.get("input") if name == "plan" and "error" not in payload else None
        if isinstance(plan, dict) and plan != self.plan:
            self.plan = plan
            out += [" " * len(head) + row for row in plan_lines(plan)]
        return out

    def open_calls(self) -> list[str]:
        """The calls still without a result (at the end of a history: running, or cut short)."""
        out = []
        for payload in self.calls.values():
            detail = call_detail(str(payload.get("name")), payload.get("input"))
            out.append(f"· {payload.get('name')}{' ' + detail if detail else ''} … (no result yet)")
        return out


def event_line(event: dict) -> str:
    """One event on its own (`#12 user: hello`), for callers that keep no state."""
    return "\n".join(Renderer().lines(event))


def agent_line(agent: dict) -> str:
    definition = agent.get("definition") or {}
    return (f"{agent.get('id')}  {definition.get('name', '')!s:<20}  {agent.get('status', '')!s:<8}  "
            f"{definition.get('modelProvider', '')}/{definition.get('model', '')}")


def continuation_lines(session: dict) -> tuple[list[str], list[str]]:
    """(before, after) a session's events: where it came from and where it goes on
    (continue_session's links)."""
    before = [f"(continued from session {session['continuedFromSessionId']})"] \
        if isinstance(session.get("continuedFromSessionId"), str) else []
    after = [f"(continues in session {session['continuedBySessionId']})"] \
        if isinstance(session.get("continuedBySessionId"), str) else []
    return before, after


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


def json_line(value) -> str:
    """One raw event for scripts (`--json` of send, chat, tail): one JSON object per line."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def when(ms: int | None) -> str:
    """A time in ms since the epoch as local `YYYY-MM-DD HH:MM:SS` ('' when unknown)."""
    import time

    if not ms:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


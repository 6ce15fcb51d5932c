"""The model's view of a session: system prompt, then user and assistant messages in seq order,
with context lines attached to the user message they came with, and the tool steps of the agent
(each `tool_call` event grouped into one assistant step, each result right after its call).

Each session's messages are kept in memory between turns (`SessionHistory`): a turn reads only
the events appended since the last one, instead of decoding the session's log again, and the
window ends at the turn's own message, so a turn far down a queue sees the conversation before
it and not the messages queued ahead of it.
"""
from __future__ import annotations

import collections
import json
from collections.abc import Iterable
from dataclasses import dataclass

from seed_agents.protocol.agent.preamble import sender_block

from ..cache import text_bytes
from ..providers.base import ChatMessage, ToolCall

HISTORY_OVERHEAD = 600   # bytes a SessionHistory costs empty (object, deque), about
ENTRY_OVERHEAD = 200     # bytes an Entry costs besides its text, about
MISSING_RESULT = "(no result was recorded for this call)"


def user_text(content: str, context_lines: tuple[str, ...]) -> str:
    if context_lines:
        return f"{content}\n\nContext:\n" + "\n".join(context_lines)
    return content


def result_text(payload: dict) -> str:
    """What the model is handed for a tool_result event (its output as JSON, or its error)."""
    if "error" in payload:
        return str(payload["error"])
    output = payload.get("output")
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    event_id: str
    role: str                      # 'user' | 'assistant' | 'tool_call' | 'tool'
    content: str                   # message text; a call's arguments (JSON); a result's text
    context_lines: tuple[str, ...] = ()
    run_id: str = ""               # the run that wrote it (meta.runId), when a run did
    call_id: str = ""              # tool_call / tool: the call's id
    name: str = ""                 # tool_call / tool: the tool's name
    is_error: bool = False         # tool: the result is an error
    attachments: tuple[dict, ...] = ()   # a user message's SessionAttachmentInfo maps
    extra: dict | None = None      # tool_call: provider state to hand back (meta.providerState)
    reasoning: tuple = ()          # tool_call: the step's thinking blocks (meta.reasoning, first call)
    sender: str = ""               # user: the account that signed it (meta.accountId with a signer), else ""


def entry_bytes(entry: Entry) -> int:
    return (ENTRY_OVERHEAD + text_bytes(entry.content) + sum(text_bytes(line) + 60 for line in entry.context_lines)
            + 300 * len(entry.attachments) + sum(len(repr(block)) for block in entry.reasoning))


def entry_of(event: dict) -> Entry | None:
    payload = event.get("event") or {}
    kind = payload.get("type")
    meta = payload.get("meta")
    run_id = meta.get("runId", "") if isinstance(meta, dict) else ""
    run_id = run_id if isinstance(run_id, str) else ""
    if kind in ("tool_call", "tool_result"):
        if payload.get("actor") == "user":
            return None   # a person's own use of a verb is not the model's step to replay
        if kind == "tool_call" and isinstance(payload.get("id"), str) and isinstance(payload.get("name"), str):
            extra = meta.get("providerState") if isinstance(meta, dict) else None
            reasoning = meta.get("reasoning") if isinstance(meta, dict) else None
            return Entry(event["seq"], event.get("id", ""), "tool_call",
                         json.dumps(payload.get("input", {}), ensure_ascii=False), (), run_id,
                         payload["id"], payload["name"], extra=extra if isinstance(extra, dict) else None,
                         reasoning=tuple(b for b in reasoning if isinstance(b, dict))
                         if isinstance(reasoning, list) else ())
        if kind == "tool_result" and isinstance(payload.get("toolCallId"), str):
            return Entry(event["seq"], event.get("id", ""), "tool", result_text(payload), (), run_id,
                         payload["toolCallId"], str(payload.get("name", "")), "error" in payload)
        return None
    if kind != "message" or not isinstance(payload.get("content"), str):
        return None
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return None
    lines = payload.get("contextLines") if role == "user" else None
    files = payload.get("attachments") if role == "user" else None
    files = tuple(a for a in files if isinstance(a, dict)) if isinstance(files, list) else ()
    return Entry(event["seq"], event.get("id", ""), role, payload["content"], tuple(lines or ()), run_id,
                 attachments=files, sender=signed_sender(payload) if role == "user" else "")


def signed_sender(payload: dict) -> str:
    """The person who signed a user message: never an injected turn (actor "system") nor a
    trigger's message (no signer)."""
    meta = payload.get("meta")
    if payload.get("actor") == "system" or not isinstance(meta, dict) or not meta.get("signerId"):
        return ""
    account = meta.get("accountId")
    return account if isinstance(account, str) else ""


class SessionHistory:
    """One session's entries as a turn sees them, extended as events are appended: a window
    that ends at the turn's own message (`upto`, its seq; None: the session's end), holding the
    last `limit` entries up to it (`head`), then the last `limit` entries after it that are not
    messages still queued (`tail`: replies to earlier turns that landed after it was sent, and
    the run's own steps and prompts). So a turn deep in a queue sees the conversation before its
    message, not the queued messages ahead of it. `bytes` is what it holds, about (the runtime's
    cache is bounded by it: server/cache.py)."""

    def __init__(self, limit: int, upto: int | None = None, anchor: str = "") -> None:
        self.upto = upto                 # the seq the window ends at, or None (the session's end)
        self.anchor = anchor             # the event id at `upto` (the turn's own message)
        self.last_seq = 0                # every event up to this seq has been read in
        self.head: collections.deque[Entry] = collections.deque(maxlen=limit)
        self.tail: collections.deque[Entry] = collections.deque(maxlen=limit)
        self.bytes = HISTORY_OVERHEAD
        # Each entry's message as the model is handed it, made once: (seq, flags) -> ChatMessage
        # (frozen), so a turn does not rebuild the whole window's messages at every pass.
        self.made: dict[tuple, ChatMessage] = {}

    @property
    def entries(self) -> list[Entry]:
        """The window in seq order."""
        return [*self.head, *self.tail]

    def extend(self, events: Iterable[dict]) -> None:
        for event in events:
            if event["seq"] <= self.last_seq:
                continue
            self.last_seq = event["seq"]
            entry = entry_of(event)
            if entry is None:
                continue
            if self.upto is None or entry.seq <= self.upto:
                self._push(self.head, entry)
            elif entry.role != "user" or entry.run_id:   # a message still queued waits for its own turn
                self._push(self.tail, entry)

    def advance(self, upto: int, events: Iterable[dict]) -> None:
        """Move the window's end on to `upto` (the next turn's message, later than this one's),
        given every event after the current end up to it: what was after the old end and up to
        the new one joins the head, in seq order, queued messages included."""
        old = self.upto if self.upto is not None else self.last_seq
        self.upto = upto
        while self.tail and self.tail[0].seq <= upto:
            self.bytes -= entry_bytes(self.tail.popleft())
        for event in events:
            if old < event["seq"] <= upto:
                entry = entry_of(event)
                if entry is not None:
                    self._push(self.head, entry)
        self.last_seq = max(self.last_seq, upto)

    def _push(self, entries: collections.deque[Entry], entry: Entry) -> None:
        if len(entries) == entries.maxlen:
            self.bytes -= entry_bytes(entries[0])   # the deque drops it
        entries.append(entry)
        self.bytes += entry_bytes(entry)

    def open_calls(self, run_id: str) -> list[Entry]:
        """The run's recorded tool calls that have no recorded result (it was interrupted)."""
        answered = {e.call_id for e in self.entries if e.role == "tool"}
        return [e for e in self.entries if e.role == "tool_call" and e.run_id == run_id
                and e.call_id not in answered]

    def call_ids(self) -> set[str]:
        return {e.call_id for e in self.entries if e.role == "tool_call"}

    def messages(self, system_prompt: str, user_event_id: str, *, include_context: bool,
                 run_id: str = "", attachments=None, senders: bool = False) -> list[ChatMessage]:
        """What the model sees for the run `run_id` answering `user_event_id`.

        User messages after it belong to runs still queued and are left out; replies to earlier
        turns that landed after it was sent are kept, before it, so the run's own message comes
        before the run's own steps (what `run_id` recorded: tool steps, messages, continuation
        prompts), which come last. The built-in echo provider answers the user event's content
        exactly (CONTRACT section 4), so it is given the messages without their context lines.
        `attachments` (server/runtime/attachment_view.py) turns a message's attachments into text
        and images. With `senders` (a shared agent), each signed human message starts with its
        <message_sender> block (protocol/agent/preamble.py)."""
        own = next((e for e in reversed(self.head) if e.event_id == user_event_id), None)
        before: list[Entry] = []
        mine: list[Entry] = []
        for e in self.entries:
            if e is own:
                continue
            if run_id and e.run_id == run_id:
                mine.append(e)
            elif own is not None and e.seq > own.seq and e.role == "user":
                continue
            else:
                before.append(e)
        ordered = before + ([own] if own is not None else []) + mine
        out = [ChatMessage("system", system_prompt)] if system_prompt else []
        if len(self.made) > 4 * ((self.head.maxlen or 0) + (self.tail.maxlen or 0)):
            self.made.clear()   # (entries that left the window)
        return out + replay(ordered, include_context, attachments, own, senders, self.made)


def replay(entries: list[Entry], include_context: bool, attachments=None,
           own: Entry | None = None, senders: bool = False, made: dict | None = None) -> list[ChatMessage]:
    """Entries as provider-neutral messages: consecutive calls are one assistant step (joined
    to the text the model said just before them), each answered right after it; a call with no
    recorded result is answered as such (providers refuse an unanswered call), and a result
    whose call is not in view is left out."""
    results = {e.call_id: e for e in entries if e.role == "tool"}
    out: list[ChatMessage] = []
    step: list[Entry] = []

    def flush() -> None:
        if not step:
            return
        calls = tuple(ToolCall(e.call_id, e.name, e.content, extra=e.extra or {}) for e in step)
        text = ""
        if out and out[-1].role == "assistant" and not out[-1].tool_calls:
            text = out.pop().content
        out.append(ChatMessage("assistant", text, tool_calls=calls, reasoning=step[0].reasoning))
        for e in step:
            r = results.get(e.call_id)
            out.append(ChatMessage("tool", r.content if r else MISSING_RESULT, tool_call_id=e.call_id,
                                   name=e.name, is_error=r.is_error if r else True))
        step.clear()

    made = {} if made is None else made
    for e in entries:
        if e.role == "tool_call":
            step.append(e)
            continue
        if e.role == "tool":
            continue   # placed with its call
        flush()
        if e.role == "user" and e.attachments and include_context and attachments is not None:
            text = (sender_block(e.sender) if senders and e.sender else "") + user_text(e.content, e.context_lines)
            extra, images = attachments(e.attachments, e is own)
            out.append(ChatMessage("user", text + extra, images))
            continue
        key = (e.seq, include_context, senders)
        message = made.get(key)
        if message is None:
            if e.role == "user":
                text = user_text(e.content, e.context_lines) if include_context else e.content
                if senders and e.sender:
                    text = sender_block(e.sender) + text
                message = ChatMessage("user", text)
            else:
                message = ChatMessage("assistant", e.content)
            made[key] = message
        out.append(message)
    flush()
    return out

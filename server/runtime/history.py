"""The model's view of a session: system prompt, then user and assistant messages in seq order,
with context lines attached to the user message they came with.

Each session's messages are kept in memory between turns (`SessionHistory`): a turn reads only
the events appended since the last one, instead of decoding the session's log again.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from server.cache import text_bytes
from server.providers.base import ChatMessage

HISTORY_OVERHEAD = 600   # bytes a SessionHistory costs empty (object, deque), about
ENTRY_OVERHEAD = 200     # bytes an Entry costs besides its text, about


def user_text(content: str, context_lines: tuple[str, ...]) -> str:
    if context_lines:
        return f"{content}\n\nContext:\n" + "\n".join(context_lines)
    return content


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    event_id: str
    role: str                      # 'user' | 'assistant'
    content: str
    context_lines: tuple[str, ...] = ()
    attachments: tuple[dict, ...] = ()   # a user message's SessionAttachmentInfo maps


def entry_bytes(entry: Entry) -> int:
    return (ENTRY_OVERHEAD + text_bytes(entry.content) + sum(text_bytes(line) + 60 for line in entry.context_lines)
            + 300 * len(entry.attachments))


def entry_of(event: dict) -> Entry | None:
    payload = event.get("event") or {}
    if payload.get("type") != "message" or not isinstance(payload.get("content"), str):
        return None
    role = payload.get("role")
    if role not in ("user", "assistant"):
        return None
    lines = payload.get("contextLines") if role == "user" else None
    files = payload.get("attachments") if role == "user" else None
    files = tuple(a for a in files if isinstance(a, dict)) if isinstance(files, list) else ()
    return Entry(event["seq"], event.get("id", ""), role, payload["content"], tuple(lines or ()), files)


class SessionHistory:
    """The last `limit` messages of one session, extended as events are appended. `bytes` is
    what it holds, about (the runtime's cache is bounded by it: server/cache.py)."""

    def __init__(self, limit: int) -> None:
        self.last_seq = 0
        self.entries: collections.deque[Entry] = collections.deque(maxlen=limit)
        self.bytes = HISTORY_OVERHEAD

    def extend(self, events: list[dict]) -> None:
        for event in events:
            if event["seq"] <= self.last_seq:
                continue
            self.last_seq = event["seq"]
            entry = entry_of(event)
            if entry is not None:
                if len(self.entries) == self.entries.maxlen:
                    self.bytes -= entry_bytes(self.entries[0])   # the deque drops it
                self.entries.append(entry)
                self.bytes += entry_bytes(entry)

    def has(self, event_id: str) -> bool:
        return any(e.event_id == event_id for e in self.entries)

    def with_entry(self, entry: Entry) -> "SessionHistory":
        """A copy that also holds `entry` (not cached)."""
        copy = SessionHistory(self.entries.maxlen + 1)
        copy.last_seq = self.last_seq
        copy.entries.extend(sorted([*self.entries, entry], key=lambda e: e.seq))
        return copy

    def messages(self, system_prompt: str, user_event_id: str, *, include_context: bool,
                 attachments=None) -> list[ChatMessage]:
        """What the model sees for the run answering `user_event_id`.

        User messages after it belong to runs still queued and are left out; replies to earlier
        turns that landed after it was sent are kept, before it, so the run's own message comes
        last. The built-in echo provider answers the user event's content exactly (CONTRACT
        section 4), so it is given the messages without their context lines. `attachments`
        (server/runtime/attachment_view.py) turns a message's attachments into text and images."""
        own = next((e for e in reversed(self.entries) if e.event_id == user_event_id), None)
        out = [ChatMessage("system", system_prompt)] if system_prompt else []
        for e in self.entries:
            if e is own or (own is not None and e.role == "user" and e.seq > own.seq):
                continue
            out.append(self._message(e, include_context, attachments, False))
        if own is not None:
            out.append(self._message(own, include_context, attachments, True))
        return out

    @staticmethod
    def _message(e: Entry, include_context: bool, attachments=None, own: bool = False) -> ChatMessage:
        if e.role == "user":
            text = user_text(e.content, e.context_lines) if include_context else e.content
            if e.attachments and include_context and attachments is not None:
                extra, images = attachments(e.attachments, own)
                return ChatMessage("user", text + extra, images)
            return ChatMessage("user", text)
        return ChatMessage("assistant", e.content)

"""What the model sees, built from a session's events (pure: no server)."""
from __future__ import annotations

from server.providers.base import ChatMessage
from server.runtime.history import SessionHistory


def ev(seq, role, content, lines=None):
    payload = {"type": "message", "role": role, "content": content}
    if lines:
        payload["contextLines"] = lines
    return {"id": f"e{seq}", "seq": seq, "event": payload}


def test_queued_messages_wait_and_earlier_replies_come_first():
    h = SessionHistory(500)
    # A sent, B sent while A's turn ran (queued), then A's reply landed.
    h.extend([ev(1, "user", "A"), ev(2, "user", "B", ["ctx"])])
    assert h.messages("sys", "e1", include_context=True) == [
        ChatMessage("system", "sys"), ChatMessage("user", "A")]
    h.extend([ev(3, "assistant", "re A")])
    assert h.messages("", "e2", include_context=True) == [
        ChatMessage("user", "A"), ChatMessage("assistant", "re A"),
        ChatMessage("user", "B\n\nContext:\nctx")]
    assert h.messages("", "e2", include_context=False)[-1] == ChatMessage("user", "B")


def test_extend_skips_seen_events_and_non_messages_and_keeps_the_window():
    h = SessionHistory(3)
    h.extend([ev(1, "user", "a"), {"id": "x", "seq": 2, "event": {"type": "error", "message": "boom"}}])
    h.extend([ev(1, "user", "a"), ev(3, "assistant", "b"), ev(4, "user", "c"), ev(5, "assistant", "d")])
    assert h.last_seq == 5
    assert [e.content for e in h.entries] == ["b", "c", "d"]
    assert h.has("e4") and not h.has("e1")
    old = SessionHistory(1)
    old.extend([ev(1, "user", "a")])
    with_old = h.with_entry(old.entries[0])
    assert [e.seq for e in with_old.entries] == [1, 3, 4, 5]
    assert [e.seq for e in h.entries] == [3, 4, 5]   # the cached history is unchanged
